package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/tick"
)

func TestPostEventsCountsDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	e.put("brom", bromSettings())
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		events []Event
		want   EventsAccepted
	}{
		{"new", []Event{{ID: "evt-1", Kind: "say", Actor: "alice", Text: "I lost my sword.", Room: "forge", At: at}}, EventsAccepted{Accepted: 1}},
		{"repeated id", []Event{{ID: "evt-1", Kind: "say", Actor: "alice", Text: "I lost my sword."}}, EventsAccepted{Duplicates: 1}},
		{"one new, one repeated", []Event{{ID: "evt-2", Kind: "arrive", Actor: "bob"}, {ID: "evt-1", Kind: "say", Actor: "alice", Text: "again"}}, EventsAccepted{Accepted: 1, Duplicates: 1}},
		{"no id", []Event{{Kind: "emote", Actor: "bob", Text: "waves"}}, EventsAccepted{Accepted: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.client.PostEvents(ctx, "brom", tt.events)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("PostEvents = %+v, want %+v", got, tt.want)
			}
		})
	}
	if n, err := e.chars.PendingCount(ctx, "brom"); err != nil || n != 3 {
		t.Errorf("pending = %d, %v; want 3", n, err)
	}
	r := e.do("POST", "/v1/npcs/brom/events", `{"events": [{"id": "evt-9", "kind": "say", "actor": "alice", "text": "hi", "at": "2026-11-21T10:00:00Z"}]}`)
	if r.status != http.StatusAccepted || strings.TrimSpace(string(r.body)) != `{"accepted":1,"duplicates":0}` {
		t.Errorf("POST events = %d %s, want 202 {\"accepted\":1,\"duplicates\":0}", r.status, r.body)
	}
}

func TestTickSaysSomethingAboutTheEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	e.put("brom", bromSettings())
	e.say("brom", "evt-1", "I lost my sword at the forge.")
	res, err := e.client.Tick(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if res.Idle || res.NPC != "brom" || res.Tick != 1 {
		t.Errorf("tick = npc %q tick %d idle %v, want brom 1 false", res.NPC, res.Tick, res.Idle)
	}
	if len(res.Actions) == 0 {
		t.Fatalf("no actions: %+v", res)
	}
	a := res.Actions[0]
	text, _ := a.Args["text"].(string)
	if a.Tool != "say" || !strings.Contains(text, "keep an eye out") || strings.Contains(text, "sword") || a.CallID == "" {
		t.Errorf("action = %+v, want a say with a call id promising to look out (in Brom's words, not alice's)", a)
	}
	if res.Usage.LLMCalls < 1 || res.Context.Tokens <= 0 || res.Context.Window != 8192 {
		t.Errorf("usage %+v context %+v, want a model call and a measured context", res.Usage, res.Context)
	}
	if res.Awaiting == nil || res.Actions == nil {
		t.Errorf("awaiting/actions must be lists, not null: %+v", res)
	}
}

func TestIdleTickCallsNoModel(t *testing.T) {
	t.Parallel()
	model := &scripted{}
	e := newEnv(t, envOpts{remote: model})
	s := bromSettings()
	s.Model = "fake"
	e.put("brom", s)
	res, err := e.client.Tick(context.Background(), "brom")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Idle || res.Usage.LLMCalls != 0 || len(res.Actions) != 0 {
		t.Errorf("tick without events = %+v, want idle with no model call", res)
	}
	if n := model.count(); n != 0 {
		t.Errorf("model called %d times by an idle tick", n)
	}
}

func TestTickMany(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	e.put("brom", bromSettings())
	e.put("mira", NPCSettings{Name: "Mira", Persona: "You are Mira, a cheerful baker."})
	e.put("olaf", NPCSettings{Name: "Olaf", Persona: "You are Olaf, a wise old fisherman."})

	e.say("brom", "b1", "Good morning!")
	e.say("mira", "m1", "Do you have bread?")
	got, err := e.client.TickMany(ctx, []string{"brom", "mira", "ghost"})
	if err != nil {
		t.Fatal(err)
	}
	var npcs []string
	for _, r := range got.Results {
		npcs = append(npcs, r.NPC)
		if r.Idle || len(r.Actions) == 0 {
			t.Errorf("%s: idle=%v actions=%d, want a non-idle tick with actions", r.NPC, r.Idle, len(r.Actions))
		}
	}
	if diff := cmp.Diff([]string{"brom", "mira"}, npcs); diff != "" {
		t.Errorf("ticked (-want +got):\n%s", diff)
	}
	wantErr := []BatchError{{NPC: "ghost", Code: CodeNotFound, Error: `npc "ghost" does not exist`}}
	if diff := cmp.Diff(wantErr, got.Errors); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}

	// An empty list ticks only the NPCs with something pending.
	for i, body := range []string{`{"npcs": []}`, `{}`, ``} {
		e.say("olaf", fmt.Sprintf("o%d", i), "Caught anything?")
		r := e.do("POST", "/v1/tick", body)
		if r.status != http.StatusOK {
			t.Fatalf("POST /v1/tick %q = %d %s", body, r.status, r.body)
		}
		if want := `"npc":"olaf"`; !strings.Contains(string(r.body), want) || strings.Contains(string(r.body), `"npc":"brom"`) {
			t.Errorf("POST /v1/tick %q = %s, want only olaf ticked", body, r.body)
		}
		if !strings.Contains(string(r.body), `"errors":[]`) {
			t.Errorf("POST /v1/tick %q = %s, want an empty errors list", body, r.body)
		}
	}
	none, err := e.client.TickMany(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(none.Results) != 0 || len(none.Errors) != 0 {
		t.Errorf("TickMany with nothing pending = %+v, want nothing", none)
	}
}

func TestReturningToolContinuesAfterResults(t *testing.T) {
	t.Parallel()
	model := &scripted{}
	e := newEnv(t, envOpts{remote: model})
	ctx := context.Background()
	s := bromSettings()
	s.Model = "fake"
	s.Tools = lookTools()
	e.put("brom", s)
	e.say("brom", "evt-1", "What do you see?")

	res, err := e.client.Tick(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Awaiting) != 1 || len(res.Actions) != 1 || res.Actions[0].Tool != "look" || res.Actions[0].CallID != res.Awaiting[0] {
		t.Fatalf("tick = actions %+v awaiting %v, want one look call awaited", res.Actions, res.Awaiting)
	}
	callID := res.Awaiting[0]
	if diff := cmp.Diff(map[string]any{"where": "forge"}, res.Actions[0].Args); diff != "" {
		t.Errorf("look args (-want +got):\n%s", diff)
	}

	// A result for a call the NPC is not waiting for is a conflict and stores nothing.
	err = e.client.PostToolResults(ctx, "brom", []ToolResult{{CallID: callID, Content: "An anvil."}, {CallID: "nope", Content: "x"}})
	ae := wantAPIError(t, err, http.StatusConflict, CodeConflict)
	if !strings.Contains(ae.Message, `results[1].call_id`) || !strings.Contains(ae.Message, `"nope"`) {
		t.Errorf("conflict message = %q, want it to name results[1].call_id and \"nope\"", ae.Message)
	}

	r := e.do("POST", "/v1/npcs/brom/tool-results", `{"results": [{"call_id": "`+callID+`", "content": "An anvil and a lost sword."}]}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("tool-results = %d %s, want 202", r.status, r.body)
	}
	before := model.count()
	next, err := e.client.Tick(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if next.Idle || next.Usage.LLMCalls < 1 || model.count() == before {
		t.Fatalf("tick after results = %+v, want the turn continued with a model call", next)
	}
	if len(next.Actions) == 0 || !strings.Contains(next.Actions[0].Args["text"].(string), "anvil") {
		t.Errorf("actions after results = %+v, want a say about what look saw", next.Actions)
	}
	if len(next.Awaiting) != 0 {
		t.Errorf("awaiting = %v after the turn went on, want none", next.Awaiting)
	}
	// The same call cannot be answered twice.
	err = e.client.PostToolResults(ctx, "brom", []ToolResult{{CallID: callID, Content: "again"}})
	wantAPIError(t, err, http.StatusConflict, CodeConflict)
}

func TestCompactAndClearContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{compactor: true})
	ctx := context.Background()
	e.put("brom", bromSettings())

	// Nothing live yet: nothing to compact.
	r := e.do("POST", "/v1/npcs/brom/compact", "")
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"compaction":null}` {
		t.Fatalf("compact with nothing live = %d %s, want 200 {\"compaction\":null}", r.status, r.body)
	}

	e.say("brom", "evt-1", "I lost my sword at the forge.")
	if _, err := e.client.Tick(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	c, err := e.client.Compact(ctx, "brom", "keep quest details only")
	if err != nil {
		t.Fatal(err)
	}
	if c == nil || c.Trigger != "manual" || c.MessagesCompacted == 0 {
		t.Fatalf("compaction = %+v, want a manual compaction of the live messages", c)
	}
	if got := e.comp.instructions[len(e.comp.instructions)-1]; got != "keep quest details only" {
		t.Errorf("instruction passed on = %q, want %q", got, "keep quest details only")
	}

	r = e.do("DELETE", "/v1/npcs/brom/context", "")
	if r.status != http.StatusNoContent {
		t.Fatalf("clear context = %d %s, want 204", r.status, r.body)
	}
	npc, err := e.client.GetNPC(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if npc.Context.LiveMessages != 0 || npc.Context.ArchivedMessages == 0 {
		t.Errorf("after clear: live %d archived %d, want 0 live and the rest archived", npc.Context.LiveMessages, npc.Context.ArchivedMessages)
	}
	hist, err := e.client.History(ctx, "brom", HistoryQuery{State: "archived"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != npc.Context.ArchivedMessages {
		t.Errorf("archived history has %d messages, want %d (nothing deleted)", len(hist), npc.Context.ArchivedMessages)
	}

	wantAPIError(t, e.client.ClearContext(ctx, "ghost"), http.StatusNotFound, CodeNotFound)
	_, err = e.client.Compact(ctx, "ghost", "")
	wantAPIError(t, err, http.StatusNotFound, CodeNotFound)
}

func TestInboxFullIs429(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{tick: tick.Config{MaxPendingEvents: 2, MaxEventsPerTick: 2}})
	ctx := context.Background()
	e.put("brom", bromSettings())
	e.say("brom", "evt-1", "one")
	e.say("brom", "evt-2", "two")
	r := e.do("POST", "/v1/npcs/brom/events", `{"events": [{"id": "evt-3", "kind": "say", "actor": "alice", "text": "three"}]}`)
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("POST events to a full inbox = %d %s, want 429", r.status, r.body)
	}
	if got := errorOf(t, r).Code; got != CodeTooBusy {
		t.Errorf("code = %q, want %q", got, CodeTooBusy)
	}
	if r.header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
	if n, err := e.chars.PendingCount(ctx, "brom"); err != nil || n != 2 {
		t.Errorf("pending = %d, %v after a refused post; want 2", n, err)
	}
}

func TestModelFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code       llm.Code
		status     int
		apiCode    string
		retryAfter bool
	}{
		{llm.CodeRateLimit, http.StatusServiceUnavailable, CodeModelUnavailable, true},
		{llm.CodeTimeout, http.StatusServiceUnavailable, CodeModelUnavailable, true},
		{llm.CodeUnavailable, http.StatusServiceUnavailable, CodeModelUnavailable, true},
		{llm.CodeAuth, http.StatusBadGateway, CodeModelError, false},
		{llm.CodeBadRequest, http.StatusBadGateway, CodeModelError, false},
		{llm.CodeBadResponse, http.StatusBadGateway, CodeModelError, false},
		{llm.CodeOverflow, http.StatusBadGateway, CodeModelError, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.code), func(t *testing.T) {
			t.Parallel()
			// The cause carries what must never reach a client.
			cause := &llm.Error{Code: tt.code, Err: errString("POST https://api.example/v1/chat: Authorization: Bearer sk-secret; SELECT * FROM prompts")}
			e := newEnv(t, envOpts{remote: &scripted{fail: cause}})
			s := bromSettings()
			s.Model = "fake"
			e.put("brom", s)
			e.say("brom", "evt-1", "Hello?")
			r := e.do("POST", "/v1/npcs/brom/tick", "")
			if r.status != tt.status {
				t.Fatalf("tick = %d %s, want %d", r.status, r.body, tt.status)
			}
			if got := errorOf(t, r).Code; got != tt.apiCode {
				t.Errorf("code = %q, want %q", got, tt.apiCode)
			}
			if got := r.header.Get("Retry-After") != ""; got != tt.retryAfter {
				t.Errorf("Retry-After present = %v, want %v", got, tt.retryAfter)
			}
			for _, secret := range []string{"sk-secret", "example", "prompts"} {
				if strings.Contains(string(r.body), secret) {
					t.Errorf("body %s leaks %q", r.body, secret)
				}
			}
			// The failed tick consumed nothing: the event is still pending.
			if n, err := e.chars.PendingCount(context.Background(), "brom"); err != nil || n != 1 {
				t.Errorf("pending = %d, %v after a failed tick; want 1", n, err)
			}
			// A batch reports the same safe failure.
			batch, err := e.client.TickMany(context.Background(), []string{"brom"})
			if err != nil {
				t.Fatal(err)
			}
			if len(batch.Errors) != 1 || batch.Errors[0].Code != tt.apiCode || strings.Contains(batch.Errors[0].Error, "sk-secret") {
				t.Errorf("batch errors = %+v, want one safe %s", batch.Errors, tt.apiCode)
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }
