package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// PATCH changes the settings it names, merges nested objects, and refuses
// what PUT refuses, changing nothing.
func TestPatchNPC(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	s := bromSettings()
	s.Masking = &MaskingSettings{KeepRecentTurns: 7, ExemptTools: []string{"look"}}
	s.Tools = lookTools()
	before := e.put("brom", s)

	r := e.do("PATCH", "/v1/npcs/brom", `{"persona": "You are Brom, who lost his hammer.", "masking": {"offload_bytes": 9000}}`)
	if r.status != http.StatusOK {
		t.Fatalf("PATCH = %d %s, want 200", r.status, r.body)
	}
	var got NPC
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	switch {
	case got.Persona != "You are Brom, who lost his hammer.":
		t.Errorf("persona = %q, want the patched one", got.Persona)
	case got.Name != "Brom" || len(got.Tools) != len(before.Tools):
		t.Errorf("untouched settings changed: %+v", got.NPCSettings)
	case got.Masking.OffloadBytes != 9000 || got.Masking.KeepRecentTurns != 7 || len(got.Masking.ExemptTools) != 1:
		t.Errorf("masking = %+v, want offload_bytes patched and the rest kept", got.Masking)
	}

	for _, tc := range []struct {
		body   string
		status int
		field  string
	}{
		{`{"context_window": 512}`, http.StatusBadRequest, "context_window"},
		{`{"context_window": 1024, "max_output_tokens": 500}`, http.StatusUnprocessableEntity, "context_window"},
		{`{"max_steps": "many"}`, http.StatusBadRequest, "max_steps"},
		{`{"colour": "red"}`, http.StatusBadRequest, "colour"},
		{`{"masking": {"keep_recent_turn": 3}}`, http.StatusBadRequest, "keep_recent_turn"},
		{`[1]`, http.StatusBadRequest, "body"},
		{`{"persona": "x"`, http.StatusBadRequest, "body"},
	} {
		r := e.do("PATCH", "/v1/npcs/brom", tc.body)
		if r.status != tc.status || !strings.Contains(errorOf(t, r).Message, tc.field) {
			t.Errorf("PATCH %s = %d %s, want %d naming %s", tc.body, r.status, r.body, tc.status, tc.field)
		}
	}
	if r := e.do("GET", "/v1/npcs/brom", ""); !strings.Contains(string(r.body), "who lost his hammer") || !strings.Contains(string(r.body), `"context_window":8192`) {
		t.Errorf("a refused patch changed the npc: %s", r.body)
	}
	if r := e.do("PATCH", "/v1/npcs/ghost", `{"persona": "x"}`); r.status != http.StatusNotFound {
		t.Errorf("PATCH of an unknown npc = %d %s, want 404", r.status, r.body)
	}
	if npc, err := e.client.PatchNPC(context.Background(), "brom", map[string]any{"max_steps": 3}); err != nil || npc.MaxSteps != 3 {
		t.Errorf("client PatchNPC = %+v, %v; want max_steps 3", npc, err)
	}
	// null puts a setting back to its default: the default tools.
	if r := e.do("PATCH", "/v1/npcs/brom", `{"tools": null}`); r.status != http.StatusOK || !strings.Contains(string(r.body), `"name":"emote"`) {
		t.Errorf("PATCH tools null = %d %s, want the default tools", r.status, r.body)
	}
}

// Events carry actor_id and actor_name over HTTP; a bad id is a 400 naming
// the field.
func TestEventActorIDOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.put("brom", bromSettings())
	r := e.do("POST", "/v1/npcs/brom/events", `{"events": [{"kind": "say", "actor_id": "acct:42", "actor_name": "Bob", "text": "Hi."}]}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("post = %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/npcs/brom/tick", ""); r.status != http.StatusOK {
		t.Fatalf("tick = %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/npcs/brom/profiles", "")
	if !strings.Contains(string(r.body), `"entity":"@acct:42"`) || !strings.Contains(string(r.body), `"name":"Bob"`) {
		t.Errorf("profiles = %s, want Bob's keyed on his id", r.body)
	}
	r = e.do("POST", "/v1/npcs/brom/events", `{"events": [{"kind": "say", "actor_id": "a b", "text": "Hi."}]}`)
	if r.status != http.StatusBadRequest || !strings.Contains(errorOf(t, r).Message, "events[0].actor_id") {
		t.Errorf("bad actor_id = %d %s, want 400 naming events[0].actor_id", r.status, r.body)
	}
}
