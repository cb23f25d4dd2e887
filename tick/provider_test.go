package tick

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
)

// fakeProvider is an OpenAI-compatible server whose answers are computed by
// a script from each request, so tests go through the real client path.
type fakeProvider struct {
	srv *httptest.Server
	mu  sync.Mutex
	// calls counts requests by kind: "tick", "summary", "extract" or "reflect".
	calls map[string]int
	// answer returns status, body and a delay for a request of kind.
	answer func(kind string, n int, req openai.ChatCompletionRequest) (int, string, time.Duration)
}

func newFakeProvider(t *testing.T) *fakeProvider {
	f := &fakeProvider{calls: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req openai.ChatCompletionRequest
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, "bad json", 400)
			return
		}
		kind := "tick"
		if len(req.Messages) > 0 {
			switch sys := req.Messages[0].Content; {
			case strings.Contains(sys, "You write the "+character.SummaryPrefix):
				kind = "summary"
			case strings.Contains(sys, "consolidate the journal"):
				kind = "extract"
			case strings.Contains(sys, "thinking back"):
				kind = "reflect"
			}
		}
		f.mu.Lock()
		f.calls[kind]++
		n := f.calls[kind]
		answer := f.answer
		f.mu.Unlock()
		status, out, delay := answer(kind, n, req)
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, out)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeProvider) count(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[kind]
}

func (f *fakeProvider) set(answer func(kind string, n int, req openai.ChatCompletionRequest) (int, string, time.Duration)) {
	f.mu.Lock()
	f.answer = answer
	f.calls = map[string]int{}
	f.mu.Unlock()
}

func completion(msg openai.ChatCompletionMessage) string {
	b, _ := json.Marshal(openai.ChatCompletionResponse{ID: "x", Object: "chat.completion", Model: "fake",
		Choices: []openai.ChatCompletionChoice{{Index: 0, Message: msg, FinishReason: "stop"}},
		Usage:   openai.Usage{PromptTokens: 100, CompletionTokens: 10, TotalTokens: 110}})
	return string(b)
}

func sayCompletion(n int, text string) string {
	return completion(openai.ChatCompletionMessage{Role: "assistant", ToolCalls: []openai.ToolCall{{
		ID: fmt.Sprintf("call_%d", n), Type: "function", Function: openai.FunctionCall{Name: "say", Arguments: fmt.Sprintf(`{"text":%q}`, text)}}}})
}

func textCompletion(text string) string {
	return completion(openai.ChatCompletionMessage{Role: "assistant", Content: text})
}

const overflowBody = `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`

// chatty answers ticks with say then a final text, and summaries with a
// valid summary.
func chatty(kind string, n int, req openai.ChatCompletionRequest) (int, string, time.Duration) {
	switch kind {
	case "extract":
		return 200, textCompletion(`{"facts":[]}`), 0
	case "reflect":
		return 200, textCompletion("I should rest."), 0
	case "summary":
		var b strings.Builder
		for _, s := range sleep.SummarySections {
			fmt.Fprintf(&b, "## %s\n- noted\n", s)
		}
		return 200, textCompletion(b.String()), 0
	}
	if last := req.Messages[len(req.Messages)-1]; last.Role == "tool" {
		return 200, textCompletion(""), 0
	}
	return 200, sayCompletion(n, "Aye, I hear you."), 0
}

// remoteEnv is an engine whose NPC "brom" uses a remote model served by a
// fake provider, with a history long enough to compact.
func remoteEnv(t *testing.T, summaryTimeout time.Duration) (*testEnv, *fakeProvider) {
	t.Helper()
	f := newFakeProvider(t)
	f.set(chatty)
	return remoteEnvFrom(t, f, summaryTimeout)
}

// remoteEnvFrom is remoteEnv over a given provider, whose script must
// answer ticks.
func remoteEnvFrom(t *testing.T, f *fakeProvider, summaryTimeout time.Duration) (*testEnv, *fakeProvider) {
	t.Helper()
	client, err := llm.NewClient(llm.ClientConfig{BaseURL: f.srv.URL + "/v1", Model: "gpt-4o-mini", MaxRetries: -1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	env := openEnvWith(t, filepath.Join(t.TempDir(), "npcd.db"), client, summaryTimeout)
	ctx := context.Background()
	c := brom()
	c.Model = "gpt-4o-mini"
	c.ContextWindow = 4096
	if _, err := env.eng.PutNPC(ctx, c); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		tickOnce(t, env, fmt.Sprintf("Tale number %d: the north road is long and the wolves are hungry this winter.", i))
	}
	return env, f
}

func tickOnce(t *testing.T, env *testEnv, text string) *Result {
	t.Helper()
	ctx := context.Background()
	if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{Kind: "say", Actor: "alice", Text: text}}); err != nil {
		t.Fatal(err)
	}
	res, err := env.eng.Tick(ctx, "brom")
	if err != nil {
		t.Fatalf("tick: %v", err)
	}
	return res
}

func TestSummarizerFailureUsesFallback(t *testing.T) {
	var sections strings.Builder
	for _, s := range sleep.SummarySections[:3] {
		fmt.Fprintf(&sections, "## %s\n- x\n", s)
	}
	cases := []struct {
		name   string
		answer func() (int, string, time.Duration)
		reason string
	}{
		{"500", func() (int, string, time.Duration) { return 500, `{"error":{"message":"boom"}}`, 0 }, "unavailable"},
		{"timeout", func() (int, string, time.Duration) { return 200, textCompletion("late"), 3 * time.Second }, "timeout"},
		{"empty", func() (int, string, time.Duration) { return 200, textCompletion(""), 0 }, "empty summary"},
		{"no sections", func() (int, string, time.Duration) { return 200, textCompletion("Everyone talked a lot."), 0 }, "missing section"},
		{"some sections", func() (int, string, time.Duration) { return 200, textCompletion(sections.String()), 0 }, "missing section"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, f := remoteEnv(t, 300*time.Millisecond)
			ctx := context.Background()
			f.set(func(kind string, n int, req openai.ChatCompletionRequest) (int, string, time.Duration) {
				if kind == "summary" {
					return tc.answer()
				}
				return chatty(kind, n, req)
			})
			before, _ := env.chars.Get(ctx, "brom")
			rec, err := env.eng.Compact(ctx, "brom", "")
			if err != nil {
				t.Fatalf("compaction failed because the model did: %v", err)
			}
			if rec == nil {
				t.Fatal("nothing was compacted")
			}
			if rec.Summarizer != sleep.SummarizerFallback || !strings.Contains(rec.FallbackReason, tc.reason) {
				t.Fatalf("summarizer %q reason %q, want fallback because %q", rec.Summarizer, rec.FallbackReason, tc.reason)
			}
			if f.count("summary") == 0 {
				t.Fatal("the model was never asked for a summary")
			}
			live, _ := env.chars.LiveMessages(ctx, "brom")
			if !live[0].Summary {
				t.Fatal("no summary at the head of the live history")
			}
			for _, s := range sleep.SummarySections {
				if !strings.Contains(live[0].Content, "## "+s) {
					t.Errorf("fallback summary lacks section %q", s)
				}
			}
			after, _ := env.chars.Get(ctx, "brom")
			prev := 0 // the summary this one replaced, archived
			if before.State.SummaryTokens > 0 {
				prev = 1
			}
			if after.State.LiveMessages+after.State.ArchivedMessages != before.State.LiveMessages+before.State.ArchivedMessages+prev {
				t.Fatalf("messages lost or duplicated: before %d+%d, after %d+%d (+%d summary)", before.State.LiveMessages, before.State.ArchivedMessages, after.State.LiveMessages, after.State.ArchivedMessages, prev)
			}
		})
	}
}

func TestOverflowCompactsOnceAndRetries(t *testing.T) {
	env, f := remoteEnv(t, 5*time.Second)
	f.set(func(kind string, n int, req openai.ChatCompletionRequest) (int, string, time.Duration) {
		if kind == "tick" && n == 1 {
			return 400, overflowBody, 0
		}
		return chatty(kind, n, req)
	})
	res := tickOnce(t, env, "Do you remember the wolves?")
	if res.Recovery != RecoveryCompacted {
		t.Fatalf("recovery %q, want %q", res.Recovery, RecoveryCompacted)
	}
	if res.Compaction == nil || res.Compaction.Trigger != sleep.TriggerOverflow {
		t.Fatalf("compaction %+v, want one with trigger overflow", res.Compaction)
	}
	if got := f.count("tick"); got != 2 { // the overflow, then the retry (a say ends the turn)
		t.Fatalf("%d tick calls to the provider, want 2", got)
	}
	if len(res.Actions) != 1 || res.Actions[0].Tool != "say" {
		t.Fatalf("actions %+v, want the retried say", res.Actions)
	}
}

func TestOverflowThatPersistsNeverLoops(t *testing.T) {
	env, f := remoteEnv(t, 5*time.Second)
	f.set(func(kind string, n int, req openai.ChatCompletionRequest) (int, string, time.Duration) {
		if kind == "tick" {
			return 400, overflowBody, 0
		}
		return chatty(kind, n, req)
	})
	ctx := context.Background()
	if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{ID: "e-final", Kind: "say", Actor: "alice", Text: "Hello?"}}); err != nil {
		t.Fatal(err)
	}
	_, err := env.eng.Tick(ctx, "brom")
	if llm.CodeOf(err) != llm.CodeOverflow {
		t.Fatalf("err %v, want the overflow reported", err)
	}
	// First call, retry after compaction, last resort with the newest turn only.
	if got := f.count("tick"); got != 3 {
		t.Fatalf("%d tick calls, want exactly 3", got)
	}
	n, err := env.chars.PendingCount(ctx, "brom")
	if err != nil || n != 1 {
		t.Fatalf("pending events %d (%v): the unanswered event must stay for the next tick", n, err)
	}
	recs, err := env.eng.deps.Compactor.(*sleep.Compactor).Records(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	overflows := 0
	for _, r := range recs {
		if r.Trigger == sleep.TriggerOverflow {
			overflows++
		}
	}
	if overflows != 1 {
		t.Fatalf("%d overflow compactions, want exactly one", overflows)
	}
}

// A reply's calls get ids of npcd's own, even when the model's repeat one
// of the history's or each other, so every result still finds its call;
// the game is given the same ids.
func TestRepeatedCallIDsAreReplaced(t *testing.T) {
	env, f := remoteEnv(t, 0) // its ticks answered with call_1, call_2, …
	ctx := context.Background()
	twice := completion(openai.ChatCompletionMessage{Role: "assistant", ToolCalls: []openai.ToolCall{
		{ID: "call_1", Type: "function", Function: openai.FunctionCall{Name: "say", Arguments: `{"text":"One."}`}},
		{ID: "call_1", Type: "function", Function: openai.FunctionCall{Name: "say", Arguments: `{"text":"Two."}`}},
		{ID: "call_new", Type: "function", Function: openai.FunctionCall{Name: "say", Arguments: `{"text":"Three."}`}},
		{ID: "call_new", Type: "function", Function: openai.FunctionCall{Name: "say", Arguments: `{"text":"Four."}`}},
	}})
	f.set(func(kind string, n int, req openai.ChatCompletionRequest) (int, string, time.Duration) {
		if kind == "tick" && req.Messages[len(req.Messages)-1].Role != "tool" {
			return 200, twice, 0
		}
		return chatty(kind, n, req)
	})
	res := tickOnce(t, env, "Say it four times.")
	live, err := env.chars.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var last []character.ToolCall
	for _, m := range live {
		for _, tc := range m.ToolCalls.V {
			if seen[tc.ID] {
				t.Fatalf("call id %q stored twice", tc.ID)
			}
			seen[tc.ID] = true
		}
		if len(m.ToolCalls.V) > 0 {
			last = m.ToolCalls.V
		}
	}
	want := []string{callID(res.Tick, 0), callID(res.Tick, 1), callID(res.Tick, 2), callID(res.Tick, 3)}
	var got, acted []string
	for _, tc := range last {
		got = append(got, tc.ID)
	}
	for _, a := range res.Actions {
		acted = append(acted, a.CallID)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") || strings.Join(acted, " ") != strings.Join(want, " ") {
		t.Fatalf("the reply's call ids were stored as %q and given to the game as %q, want %q", got, acted, want)
	}
}

// npcd's call ids are nine letters and digits, unique per tick and call
// within what nine hold, and longer past it (no two alike among these).
func TestCallIDs(t *testing.T) {
	seen := map[string]bool{}
	for _, tick := range []int64{1, 35, 36, 1295, 46656, 2176782335, 2176782336, 1 << 40} {
		for _, seq := range []int{0, 1, 35, 36, 46655, 46656} {
			id := callID(tick, seq)
			if seen[id] {
				t.Fatalf("callID(%d, %d) = %q, given twice", tick, seq, id)
			}
			seen[id] = true
			for _, r := range id {
				if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z') {
					t.Fatalf("callID(%d, %d) = %q: not letters and digits", tick, seq, id)
				}
			}
			if short := tick < 2176782336 && seq < 46656; short != (len(id) == 9) {
				t.Errorf("callID(%d, %d) = %q: %d characters", tick, seq, id, len(id))
			}
		}
	}
	if got := callID(41, 2); got != "000015002" {
		t.Errorf("callID(41, 2) = %q, want 000015002", got)
	}
}

// A history that already holds the id npcd would give a new call (a
// model's of the same form, stored before npcd gave its own) makes npcd
// take another of the same form, and results still find their calls.
func TestCallIDTakenByTheHistory(t *testing.T) {
	env, _ := remoteEnv(t, 0)
	ctx := context.Background()
	c, err := env.chars.Get(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	taken := callID(c.State.Tick+1, 0)
	old := []*character.Message{
		{Role: llm.RoleUser, Content: "[2026-11-21 10:00] alice says: \"Hello.\"", Turn: 1, Tick: 1},
		{Role: llm.RoleAssistant, Turn: 1, Tick: 1, ToolCalls: store.NewJSON([]character.ToolCall{{ID: taken, Name: "say", Args: `{"text":"Hello."}`}})},
		{Role: llm.RoleTool, ToolCallID: taken, ToolName: "say", Content: "ok", Turn: 1, Tick: 1},
	}
	if err := env.chars.AppendMessages(ctx, "brom", old, env.eng.Counter(c.Model), 8192); err != nil {
		t.Fatal(err)
	}
	res := tickOnce(t, env, "Say it again.")
	if len(res.Actions) == 0 {
		t.Fatal("the tick made no call")
	}
	live, err := env.chars.LiveMessages(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	calls, results := map[string]int{}, map[string]int{}
	for _, m := range live {
		for _, tc := range m.ToolCalls.V {
			calls[tc.ID]++
		}
		if m.Role == llm.RoleTool {
			results[m.ToolCallID]++
		}
	}
	got := res.Actions[0].CallID
	if got == taken || calls[got] != 1 || results[got] != 1 || calls[taken] != 1 {
		t.Fatalf("new call id %q (history's %q): calls %v, results %v; want a new id, each call once with its result", got, taken, calls, results)
	}
	if len(got) != 9 {
		t.Errorf("new call id %q: want nine letters and digits", got)
	}
}
