package api

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// sseEvent is one server-sent event.
type sseEvent struct {
	id, event, data string
}

// openStream opens the action stream and returns a reader of its events.
func (e *env) openStream(t *testing.T, query string, header ...string) (*http.Response, func() (sseEvent, bool)) {
	t.Helper()
	req, err := http.NewRequest("GET", e.ts.URL+"/v1/actions/stream"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	next := func() (sseEvent, bool) {
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" {
					return ev, true
				}
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			default:
				t.Errorf("unexpected stream line %q", line)
			}
		}
		return ev, false
	}
	return resp, next
}

// The stream pushes each committed tick as an event whose id is its
// cursor; Last-Event-ID resumes after it; the stream ends when the feed
// stops.
func TestActionStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.put("brom", bromSettings())
	e.put("mira", NPCSettings{Name: "Mira", Persona: "You are Mira, a baker."})
	e.say("brom", "b1", "Hello!")
	e.do("POST", "/v1/npcs/brom/tick", "")

	resp, next := e.openStream(t, "?after=0&npc=brom")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream = %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	first, ok := next()
	var ft FeedTick
	if !ok || first.event != "tick" || json.Unmarshal([]byte(first.data), &ft) != nil || ft.NPC != "brom" || len(ft.Actions) == 0 ||
		first.id != strconv.FormatInt(ft.Cursor, 10) {
		t.Fatalf("first event = %+v (%+v), want brom's tick with its cursor as id", first, ft)
	}
	// Pushed as it commits; other NPCs filtered out.
	e.say("mira", "m1", "Bread?")
	e.do("POST", "/v1/npcs/mira/tick", "")
	e.say("brom", "b2", "A blade?")
	e.do("POST", "/v1/npcs/brom/tick", "")
	second, ok := next()
	if !ok || json.Unmarshal([]byte(second.data), &ft) != nil || ft.NPC != "brom" || ft.Tick != 2 {
		t.Fatalf("second event = %+v, want brom's second tick", second)
	}

	// A reconnect with Last-Event-ID (overriding after) starts after it.
	_, again := e.openStream(t, "?after=0&npc=brom", "Last-Event-ID", first.id)
	if ev, ok := again(); !ok || ev.id != second.id {
		t.Fatalf("resumed stream's first event = %+v, want the second tick (%s)", ev, second.id)
	}
	// Shutdown ends the streams cleanly.
	e.eng.StopFeed()
	if ev, ok := next(); ok {
		t.Errorf("after StopFeed the stream sent %+v, want its end", ev)
	}
	if ev, ok := again(); ok {
		t.Errorf("after StopFeed the resumed stream sent %+v, want its end", ev)
	}
	r := e.do("GET", "/v1/actions/stream?after=x", "")
	if r.status != http.StatusBadRequest || !strings.Contains(errorOf(t, r).Message, "after") {
		t.Errorf("bad after = %d %s, want 400 naming after", r.status, r.body)
	}
}
