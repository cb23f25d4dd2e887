package tick

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// Every tick writes one structured line: who, which tick, tokens, model
// time, compaction; idle ticks only at debug level.
func TestTickLogLine(t *testing.T) {
	env := newEnv(t)
	var buf bytes.Buffer
	env.eng.deps.Log = zerolog.New(&buf).Level(zerolog.InfoLevel)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{ID: "evt-1", Kind: "say", Actor: "alice", Text: "Any news?"}}); err != nil {
		t.Fatal(err)
	}
	res, err := env.eng.Tick(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.eng.Tick(ctx, "brom"); err != nil { // idle: not at info
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var ticks []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["message"] == "tick" {
			ticks = append(ticks, m)
		}
	}
	if len(ticks) != 1 {
		t.Fatalf("tick lines = %d, want 1 (the idle tick logs at debug):\n%s", len(ticks), buf.String())
	}
	got := ticks[0]
	for key, want := range map[string]any{
		"npc": "brom", "tick": float64(res.Tick), "idle": false,
		"prompt_tokens": float64(res.Usage.PromptTokens), "completion_tokens": float64(res.Usage.CompletionTokens),
		"llm_calls": float64(res.Usage.LLMCalls),
	} {
		if got[key] != want {
			t.Errorf("tick line %s = %v, want %v", key, got[key], want)
		}
	}
	for _, key := range []string{"model_ms", "duration_ms", "utilization"} {
		if _, ok := got[key].(float64); !ok {
			t.Errorf("tick line lacks %s: %v", key, got)
		}
	}
	if res.Usage.PromptTokens == 0 {
		t.Error("the tick used no prompt tokens; the check above proves nothing")
	}
}
