package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/npcd/npcd/character"
)

func TestPutNPCCreatesWithDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	npc, created, err := e.client.PutNPC(context.Background(), "brom", bromSettings())
	if err != nil {
		t.Fatal(err)
	}
	if !created {
		t.Errorf("created = false, want true for a new NPC")
	}
	on := true
	want := NPC{
		ID: "brom",
		NPCSettings: NPCSettings{
			Name: "Brom", Persona: "You are Brom, the gruff village blacksmith of Oakvale.", Model: character.DefaultModel,
			ContextWindow: character.DefaultContextWindow, MaxOutputTokens: character.DefaultMaxOutputTokens, MaxSteps: character.DefaultMaxSteps,
			Compaction: &CompactionSettings{SleepThreshold: 0.70, EmergencyThreshold: 0.80, PreserveRecentMessages: 20, PreserveRatio: 0.20, Target: 0.50},
			Masking:    &MaskingSettings{KeepRecentTurns: 10, Enabled: &on, ExemptTools: []string{}, OffloadBytes: character.DefaultOffloadBytes},
			Sleep:      &SleepSettings{},
			AutoTick:   &AutoTickSettings{DebounceMS: 50, MaxWaitMS: 500},
		},
		Warnings: []string{},
	}
	opts := cmp.Options{
		cmpopts.IgnoreFields(NPC{}, "Context", "CreatedAt", "UpdatedAt"),
		cmpopts.IgnoreFields(NPCSettings{}, "Tools"),
	}
	if diff := cmp.Diff(want, *npc, opts); diff != "" {
		t.Errorf("PUT response (-want +got):\n%s", diff)
	}
	var names []string
	for _, tl := range npc.Tools {
		names = append(names, tl.Name)
	}
	if diff := cmp.Diff([]string{"say", "emote"}, names); diff != "" {
		t.Errorf("default tools (-want +got):\n%s", diff)
	}
	if npc.Context.Window != character.DefaultContextWindow || npc.Context.Tokens <= 0 {
		t.Errorf("context = %+v, want window %d and the persona's tokens", npc.Context, character.DefaultContextWindow)
	}
	if npc.CreatedAt.IsZero() {
		t.Errorf("created_at is zero")
	}
}

func TestPutNPCReplaceKeepsHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	e.put("brom", bromSettings())
	e.say("brom", "evt-1", "I lost my sword at the forge.")
	if _, err := e.client.Tick(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	before, err := e.client.History(ctx, "brom", HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(before) == 0 {
		t.Fatalf("no history after a tick")
	}

	s := bromSettings()
	s.ContextWindow = 16384
	s.Tools = []Tool{}
	npc, created, err := e.client.PutNPC(ctx, "brom", s)
	if err != nil {
		t.Fatal(err)
	}
	if created {
		t.Errorf("created = true, want false when replacing")
	}
	if npc.ContextWindow != 16384 || npc.Context.Window != 16384 {
		t.Errorf("context_window = %d (context %d), want 16384", npc.ContextWindow, npc.Context.Window)
	}
	if len(npc.Tools) != 0 {
		t.Errorf("tools = %+v, want none after PUT with an empty list", npc.Tools)
	}
	if npc.Context.LiveMessages != len(before) {
		t.Errorf("live_messages = %d after replace, want %d", npc.Context.LiveMessages, len(before))
	}
	after, err := e.client.History(ctx, "brom", HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("history changed by replace (-before +after):\n%s", diff)
	}
}

func TestPutNPCStatusCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	body := `{"name": "Brom", "persona": "You are Brom."}`
	for i, want := range []int{http.StatusCreated, http.StatusOK} {
		r := e.do("PUT", "/v1/npcs/brom", body)
		if r.status != want {
			t.Fatalf("PUT #%d = %d %s, want %d", i+1, r.status, r.body, want)
		}
		var got map[string]any
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"id", "name", "persona", "model", "context_window", "max_output_tokens", "max_steps",
			"compaction", "masking", "sleep", "tools", "context", "warnings"} {
			if _, ok := got[k]; !ok {
				t.Errorf("PUT response lacks %q: %s", k, r.body)
			}
		}
	}
}

func TestGetAndListNPCs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	put := e.put("brom", bromSettings())
	mira := e.put("mira", NPCSettings{Name: "Mira", Persona: "You are Mira, a cheerful baker."})

	got, err := e.client.GetNPC(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(put, got); diff != "" {
		t.Errorf("GET differs from PUT's answer (-put +get):\n%s", diff)
	}
	r := e.do("GET", "/v1/npcs/brom", "")
	var ctxOnly struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(r.body, &ctxOnly); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tokens", "window", "utilization", "summary_tokens", "live_messages", "archived_messages", "compactions"} {
		if _, ok := ctxOnly.Context[k]; !ok {
			t.Errorf("context lacks %q: %s", k, r.body)
		}
	}

	list, err := e.client.ListNPCs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]NPC{*put, *mira}, list); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
}

func TestDeleteNPC(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	e.put("brom", bromSettings())
	e.say("brom", "evt-1", "Hello there.")
	r := e.do("DELETE", "/v1/npcs/brom", "")
	if r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("DELETE = %d %q, want 204 and no body", r.status, r.body)
	}
	_, err := e.client.GetNPC(ctx, "brom")
	ae := wantAPIError(t, err, http.StatusNotFound, CodeNotFound)
	if want := `npc "brom" does not exist`; ae.Message != want {
		t.Errorf("message = %q, want %q", ae.Message, want)
	}
	wantAPIError(t, e.client.DeleteNPC(ctx, "brom"), http.StatusNotFound, CodeNotFound)
	if n, err := e.chars.PendingCount(ctx, "brom"); err != nil || n != 0 {
		t.Errorf("pending events after delete = %d, %v; want 0", n, err)
	}
}

func TestRejectedPutChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	orig := e.put("brom", bromSettings())
	bodies := map[string]string{
		"unknown field":   `{"name": "Brom", "persona": "x", "colour": "red"}`,
		"missing persona": `{"name": "Brom 2"}`,
		"bad schema":      `{"name": "Brom 2", "persona": "x", "tools": [{"name": "look", "parameters": {"type": 12}}]}`,
		"bad threshold":   `{"name": "Brom 2", "persona": "x", "compaction": {"sleep_threshold": 2}}`,
		"trailing data":   `{"name": "Brom 2", "persona": "x"} {}`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			r := e.do("PUT", "/v1/npcs/brom", body)
			if r.status < 400 {
				t.Fatalf("PUT = %d, want an error", r.status)
			}
			errorOf(t, r)
			got, err := e.client.GetNPC(ctx, "brom")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(orig, got); diff != "" {
				t.Errorf("stored NPC changed by a rejected PUT (-before +after):\n%s", diff)
			}
		})
	}
}

func TestClientHealth(t *testing.T) {
	e := newEnv(t, envOpts{token: "s3cret"})
	if err := e.client.Health(context.Background()); err != nil {
		t.Fatalf("health of a running server: %v", err)
	}
	e.ts.Close()
	if err := e.client.Health(context.Background()); err == nil {
		t.Fatal("health of a stopped server reported no error")
	}
}
