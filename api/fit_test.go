package api

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Settings whose fixed part leaves no room for a summary and a turn below
// the compaction target are refused with the field to change and the room
// needed, and change nothing.
func TestSettingsThatLeaveNoRoomAreRefused(t *testing.T) {
	e := newEnv(t, envOpts{})
	long := strings.Repeat("Brom knows every blade, hinge and horseshoe ever forged in Oakvale, and who paid for it. ", 75)
	body := func(persona string, extra string) string {
		b, _ := json.Marshal(persona)
		return `{"name": "Brom", "persona": ` + string(b) + extra + `}`
	}
	minWindow := regexp.MustCompile(`context_window of at least (\d+)`)
	tests := []struct {
		name, body, field string
	}{
		{"a persona of 40% of a 4,096 window", body(long, `, "context_window": 4096`), "persona"},
		{"default settings in 2,048 tokens", body("You are Brom.", `, "context_window": 2048`), "context_window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("PUT", "/v1/npcs/brom", tt.body)
			if r.status != 422 {
				t.Fatalf("PUT = %d %s, want 422", r.status, r.body)
			}
			got := errorOf(t, r)
			if got.Code != CodeInvalidValue || !strings.HasPrefix(got.Message, tt.field+":") || !strings.Contains(got.Message, "need") {
				t.Fatalf("error %+v, want %s naming %s and the room needed", got, CodeInvalidValue, tt.field)
			}
			m := minWindow.FindStringSubmatch(got.Message)
			if m == nil {
				t.Fatalf("the message does not give the smallest window: %s", got.Message)
			}
			if r := e.do("GET", "/v1/npcs/brom", ""); r.status != 404 {
				t.Fatalf("the refused NPC exists: %d %s", r.status, r.body)
			}
			// The window the message names fits these settings.
			n, _ := strconv.Atoi(m[1])
			fixed := regexp.MustCompile(`"context_window": \d+`).ReplaceAllString(tt.body, fmt.Sprintf(`"context_window": %d`, n))
			if r := e.do("PUT", "/v1/npcs/brom", fixed); r.status != 201 {
				t.Fatalf("PUT with the window the message names (%d) = %d %s", n, r.status, r.body)
			}
			if r := e.do("DELETE", "/v1/npcs/brom", ""); r.status != 204 {
				t.Fatalf("DELETE = %d", r.status)
			}
		})
	}
	// Replacing the settings of an NPC with unfit ones keeps the old ones.
	e.put("brom", bromSettings())
	if r := e.do("PUT", "/v1/npcs/brom", body(long, `, "context_window": 4096`)); r.status != 422 {
		t.Fatalf("replacing = %d %s, want 422", r.status, r.body)
	}
	r := e.do("GET", "/v1/npcs/brom", "")
	var npc NPC
	if err := json.Unmarshal(r.body, &npc); err != nil || npc.Persona != bromSettings().Persona {
		t.Fatalf("after a refused replace the NPC is %+v (%v), want its old persona", npc, err)
	}
}

// An event dated far ahead of the game's clock is refused with 422 naming
// it, and nothing of the request is stored.
func TestEventFarAheadIsRefused(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.put("brom", bromSettings())
	e.say("brom", "evt-1", "Morning, Brom.")
	if r := e.do("POST", "/v1/npcs/brom/tick", ""); r.status != 200 {
		t.Fatalf("tick = %d %s", r.status, r.body)
	}
	r := e.do("POST", "/v1/npcs/brom/events", `{"events": [{"id": "evt-2", "kind": "say", "actor": "bob", "text": "Hi."},
		{"id": "evt-3", "kind": "say", "actor": "bob", "text": "The end of days.", "at": "9999-12-31T00:00:00Z"}]}`)
	if r.status != 422 {
		t.Fatalf("POST = %d %s, want 422", r.status, r.body)
	}
	if got := errorOf(t, r); got.Code != CodeInvalidValue || !strings.HasPrefix(got.Message, "events[1].at:") {
		t.Fatalf("error %+v, want events[1].at", got)
	}
	// evt-2 was not stored: posting it again accepts it.
	r = e.do("POST", "/v1/npcs/brom/events", `{"events": [{"id": "evt-2", "kind": "say", "actor": "bob", "text": "Hi."}]}`)
	if r.status != 202 || !strings.Contains(string(r.body), `"accepted":1`) {
		t.Fatalf("re-post = %d %s, want evt-2 accepted", r.status, r.body)
	}
}
