package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// storedEvents counts the events stored for NPC id, consumed or not.
func (e *env) storedEvents(id string) int {
	e.t.Helper()
	var n int64
	if err := e.db.Raw("SELECT count(*) FROM events WHERE character_id = ?", id).Scan(&n).Error; err != nil {
		e.t.Fatal(err)
	}
	return int(n)
}

// A batch tick that carries events posts them, as POST
// /v1/npcs/{npc}/events would, before its NPCs tick: the NPC ticks on
// them. Events refused (malformed, for an unknown NPC) are told beside the
// ticks, store nothing, and leave the NPC to tick on what it had pending.
// Replayed with the same event ids and key, the batch stores nothing again
// and answers the same tick.
func TestBatchTickCarriesEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.put("brom", bromSettings())
	e.put("mira", NPCSettings{Name: "Mira", Persona: "You are Mira, a cheerful baker."})
	e.put("tomas", NPCSettings{Name: "Tomas", Persona: "You are Tomas, the miller."})
	e.say("tomas", "t0", "Is the mill turning?") // pending before the batch

	r := e.do("POST", "/v1/tick", `{"npcs": ["brom", "mira", "ghost", "tomas"], "events": {
		"brom": [{"id": "b1", "kind": "say", "actor": "alice", "text": "Hello, smith!"},
		         {"id": "b2", "kind": "emote", "actor": "alice", "text": "waves"}],
		"mira": [{"kind": "say", "actor": "alice", "text": "Bread?", "at": "yesterday"}],
		"ghost": [{"kind": "say", "actor": "alice", "text": "Anyone?"}],
		"tomas": [{"kind": "", "actor": "alice", "text": "Hm?"}]}}`)
	if r.status != http.StatusOK {
		t.Fatalf("batch with events = %d %s, want 200", r.status, r.body)
	}
	var out BatchTickResponse
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	wantEvents := map[string]BatchEvents{
		"brom":  {Accepted: 2},
		"mira":  {Code: CodeBadRequest, Error: `events[0].at: must be an RFC 3339 time such as 2026-11-21T10:00:00Z, got "yesterday"`},
		"ghost": {Code: CodeNotFound, Error: `npc "ghost" does not exist`},
		"tomas": {Code: CodeBadRequest, Error: "events[0].kind: is required"},
	}
	if diff := cmp.Diff(wantEvents, out.Events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	ticked := map[string]int{}
	for _, res := range out.Results {
		if !res.Idle {
			ticked[res.NPC] = res.Events
		}
	}
	// brom ticks on both events, tomas on the one pending before; mira's
	// refused event leaves her nothing to answer.
	if diff := cmp.Diff(map[string]int{"brom": 2, "tomas": 1}, ticked); diff != "" {
		t.Errorf("NPCs ticked, with the events each perceived (-want +got):\n%s", diff)
	}
	if len(out.Results) != 3 || len(out.Errors) != 1 || out.Errors[0].NPC != "ghost" || out.Errors[0].Code != CodeNotFound {
		t.Errorf("results %d, errors %+v; want brom, mira and tomas ticked, ghost not found", len(out.Results), out.Errors)
	}
	if b, m, tm := e.storedEvents("brom"), e.storedEvents("mira"), e.storedEvents("tomas"); b != 2 || m != 0 || tm != 1 {
		t.Errorf("events stored: brom %d, mira %d, tomas %d; want 2, 0, 1", b, m, tm)
	}

	// The same batch again, keyed: once stored and ticked, a replay stores
	// nothing and answers the stored tick.
	keyed := `{"npcs": ["brom"], "keys": {"brom": "round-2"}, "events": {"brom": [{"id": "b3", "kind": "say", "actor": "alice", "text": "Is my sword ready?"}]}}`
	first := e.do("POST", "/v1/tick", keyed)
	again := e.do("POST", "/v1/tick", keyed)
	var a, b BatchTickResponse
	if err := json.Unmarshal(first.body, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(again.body, &b); err != nil {
		t.Fatal(err)
	}
	if a.Events["brom"] != (BatchEvents{Accepted: 1}) || b.Events["brom"] != (BatchEvents{Duplicates: 1}) {
		t.Errorf("events of the keyed batch = %+v, then %+v; want 1 accepted, then 1 duplicate", a.Events, b.Events)
	}
	if len(a.Results) != 1 || len(b.Results) != 1 || a.Results[0].Tick != b.Results[0].Tick || a.Results[0].Events != 1 {
		t.Errorf("keyed batch results = %+v, then %+v; want one tick on one event, answered twice", a.Results, b.Results)
	}
	if n, s := e.tickRecords("brom"), e.storedEvents("brom"); n != 2 || s != 3 {
		t.Errorf("brom: %d ticks, %d events stored; want 2 and 3", n, s)
	}

	// The Go client sends the same request.
	res, err := e.client.TickBatch(context.Background(), BatchTickRequest{NPCs: []string{"mira"},
		Events: map[string][]Event{"mira": {{ID: "m1", Kind: "say", Actor: "alice", Text: "Bread?"}}}})
	if err != nil || res.Events["mira"] != (BatchEvents{Accepted: 1}) || len(res.Results) != 1 || res.Results[0].Events != 1 {
		t.Errorf("client batch with events = %+v, %v; want mira's event stored and ticked", res, err)
	}
}

// Events for an NPC the batch does not name refuse the whole batch, and
// store nothing.
func TestBatchTickEventsMustNameListedNPCs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.put("brom", bromSettings())
	e.put("mira", NPCSettings{Name: "Mira", Persona: "You are Mira, a cheerful baker."})
	ev := `[{"kind": "say", "actor": "alice", "text": "Hello!"}]`
	for _, tt := range []struct{ body, msg string }{
		{`{"npcs": ["brom"], "events": {"brom": ` + ev + `, "mira": ` + ev + `}}`, "events.mira: names no npc of npcs"},
		{`{"events": {"brom": ` + ev + `}}`, "events: needs the npcs they are for listed in npcs"},
		{`{"npcs": ["Bad!", "brom"], "events": {"Bad!": ` + ev + `}}`, "events.Bad!: names no npc of npcs"},
		{`{"npcs": ["brom"], "events": {"brom": {"kind": "say"}}}`, "events.brom"},
	} {
		r := e.do("POST", "/v1/tick", tt.body)
		if r.status != http.StatusBadRequest || !strings.Contains(errorOf(t, r).Message, tt.msg) {
			t.Errorf("POST /v1/tick %s = %d %s, want 400 %q", tt.body, r.status, r.body, tt.msg)
		}
	}
	if b, m := e.storedEvents("brom"), e.storedEvents("mira"); b != 0 || m != 0 {
		t.Errorf("refused batches stored events: brom %d, mira %d", b, m)
	}
	if n := e.tickRecords("brom"); n != 0 {
		t.Errorf("refused batches ticked brom %d times", n)
	}
}

// Streamed, a batch tick tells what became of each NPC's events on lines
// of their own, before any tick's line.
func TestBatchTickNDJSONCarriesEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.put("brom", bromSettings())
	e.put("mira", NPCSettings{Name: "Mira", Persona: "You are Mira, a cheerful baker."})
	r := e.do("POST", "/v1/tick", `{"npcs": ["brom", "mira"], "events": {
		"brom": [{"kind": "say", "actor": "alice", "text": "Hello, smith!"}],
		"mira": [{"kind": "say", "actor": "mira", "text": "I talk to myself."}]}}`, "Accept", "application/x-ndjson")
	if r.status != http.StatusOK {
		t.Fatalf("ndjson batch with events = %d %s", r.status, r.body)
	}
	var kinds []string
	events := map[string]BatchEvents{}
	ticked := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		var l BatchLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		switch {
		case l.Events != nil && l.Result == nil && l.Error == nil:
			kinds = append(kinds, "events")
			events[l.Events.NPC] = l.Events.BatchEvents
		case l.Result != nil && l.Events == nil && l.Error == nil:
			kinds = append(kinds, "result")
			ticked[l.Result.NPC] = l.Result.Events
		default:
			t.Fatalf("line %q: want exactly one of result, error and events", sc.Text())
		}
	}
	if diff := cmp.Diff([]string{"events", "events", "result", "result"}, kinds); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if events["brom"] != (BatchEvents{Accepted: 1}) || events["mira"].Code != CodeInvalidValue || events["mira"].Accepted != 0 {
		t.Errorf("events lines = %+v; want brom's stored, mira's refused as her own words", events)
	}
	if ticked["brom"] != 1 || ticked["mira"] != 0 {
		t.Errorf("ticks = %v; want brom on its event, mira idle", ticked)
	}
}

// A tick of one NPC can carry its events: they are posted first, and the
// answer's headers say how many were stored and how many seen before. A
// refused event, or a refused key, refuses the request whole: nothing
// stored, nothing ticked.
func TestTickCarriesEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.put("brom", bromSettings())
	body := `{"events": [{"id": "e1", "kind": "say", "actor": "alice", "text": "Hello, smith!"},
		{"id": "e2", "kind": "emote", "actor": "alice", "text": "waves"}]}`
	first := e.do("POST", "/v1/npcs/brom/tick", body, "Idempotency-Key", "round-1")
	again := e.do("POST", "/v1/npcs/brom/tick", body, "Idempotency-Key", "round-1")
	if first.status != http.StatusOK || again.status != http.StatusOK {
		t.Fatalf("tick with events = %d %s, then %d %s", first.status, first.body, again.status, again.body)
	}
	var res TickResult
	if err := json.Unmarshal(first.body, &res); err != nil {
		t.Fatal(err)
	}
	if res.Tick != 1 || res.Events != 2 || res.Idle {
		t.Errorf("tick with events = tick %d on %d events (idle %v); want tick 1 on both", res.Tick, res.Events, res.Idle)
	}
	headers := func(r response) [2]string {
		return [2]string{r.header.Get(HeaderEventsAccepted), r.header.Get(HeaderEventsDuplicates)}
	}
	if headers(first) != [2]string{"2", "0"} || headers(again) != [2]string{"0", "2"} {
		t.Errorf("events headers = %v, then %v; want 2 stored, then 2 seen before", headers(first), headers(again))
	}
	if string(first.body) != string(again.body) || e.tickRecords("brom") != 1 || e.storedEvents("brom") != 2 {
		t.Errorf("retried tick with events = %s (first %s), %d ticks, %d events stored; want the same answer, 1 tick, 2 events",
			again.body, first.body, e.tickRecords("brom"), e.storedEvents("brom"))
	}

	for _, tt := range []struct {
		body, key string
		status    int
		field     string
	}{
		{`{"events": [{"kind": "", "actor": "alice", "text": "Hm?"}]}`, "", http.StatusBadRequest, "events[0].kind"},
		{`{"events": [{"kind": "say", "actor": "alice", "text": "Hm?", "at": "soon"}]}`, "", http.StatusBadRequest, "events[0].at"},
		{`{"events": [{"kind": "say", "actor": "alice", "text": "Hm?"}]}`, "has space", http.StatusBadRequest, "Idempotency-Key"},
		{`{"events": [{"kind": "say", "actor": "Brom", "text": "I am me."}]}`, "", http.StatusUnprocessableEntity, "events[0].actor"},
		{`{"events": []}`, "", http.StatusBadRequest, "events"},
	} {
		var hdr []string
		if tt.key != "" {
			hdr = []string{"Idempotency-Key", tt.key}
		}
		e.say("brom", "", "Something to answer.") // pending, so a tick would not be idle
		r := e.do("POST", "/v1/npcs/brom/tick", tt.body, hdr...)
		if r.status != tt.status || !strings.HasPrefix(errorOf(t, r).Message, tt.field+":") {
			t.Errorf("tick with %s (key %q) = %d %s; want %d naming %s", tt.body, tt.key, r.status, r.body, tt.status, tt.field)
		}
	}
	if n, s := e.tickRecords("brom"), e.storedEvents("brom"); n != 1 || s != 7 {
		t.Errorf("after refused ticks: %d ticks, %d events stored; want 1 tick and only the 5 lines said beside (7)", n, s)
	}

	// The Go client sends the same request.
	got, posted, err := e.client.TickWithEvents(context.Background(), "brom", "round-2", []Event{{ID: "e3", Kind: "say", Actor: "alice", Text: "Is it ready?"}})
	if err != nil || posted != (EventsAccepted{Accepted: 1}) || got.Tick != 2 || got.Events != 6 {
		t.Errorf("client tick with events = %+v, %+v, %v; want tick 2 on the 5 pending lines and the new event", got, posted, err)
	}
}
