package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/npcd/npcd/sleep"
)

func TestCompactionsAreListedAndWarned(t *testing.T) {
	e := newEnv(t, envOpts{realCompactor: true})
	ctx := context.Background()
	s := bromSettings()
	s.ContextWindow = 2048
	s.MaxOutputTokens = 256 // the default 512 leaves no room for a turn in 2,048 tokens
	e.put("brom", s)
	if rs, err := e.client.Compactions(ctx, "brom"); err != nil || len(rs) != 0 {
		t.Fatalf("before any compaction: %v %v", rs, err)
	}
	for i := 0; i < 4; i++ {
		for j := 0; j < 8; j++ {
			e.say("brom", fmt.Sprintf("e-%d-%d", i, j), fmt.Sprintf("Story %d.%d: the wolves of the north road took 17 sheep from Oakvale and nobody paid for them.", i, j))
			if _, err := e.client.Tick(ctx, "brom"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.client.Compact(ctx, "brom", "keep the sheep count"); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := e.client.Compactions(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	manual := 0
	for i, r := range rs {
		if r.ID <= 0 || r.MessagesCompacted == 0 || r.TokensAfter >= r.TokensBefore || r.SummaryMessageID == 0 || r.JournalID == 0 {
			t.Errorf("compaction %d incomplete: %+v", i, r)
		}
		if i > 0 && r.ID <= rs[i-1].ID {
			t.Errorf("compactions not oldest first: %d after %d", r.ID, rs[i-1].ID)
		}
		if r.Trigger == sleep.TriggerManual {
			manual++
			if r.Instruction != "keep the sheep count" {
				t.Errorf("instruction %q not recorded", r.Instruction)
			}
		}
	}
	if manual < 3 {
		t.Fatalf("%d manual compactions recorded, want at least 3: %+v", manual, rs)
	}
	npc, err := e.client.GetNPC(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if npc.Context.Compactions != len(rs) {
		t.Errorf("context.compactions %d, records %d", npc.Context.Compactions, len(rs))
	}
	if len(npc.Warnings) == 0 || !strings.Contains(npc.Warnings[0], fmt.Sprintf("rewritten %d times", len(rs))) {
		t.Errorf("warnings %v, want the summary rewrite warning", npc.Warnings)
	}
	var apiErr *APIError
	if _, err := e.client.Compactions(ctx, "nobody"); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Errorf("unknown npc: %v, want 404", err)
	}
}
