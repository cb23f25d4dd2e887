package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/tick"
	"github.com/npcd/npcd/tools"
)

// tickRecords counts the ticks NPC id committed.
func (e *env) tickRecords(id string) int {
	e.t.Helper()
	rs, err := e.chars.Ticks(context.Background(), id, 0, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(rs)
}

// tickBody posts a tick of NPC id with key and returns the raw answer.
func (e *env) tickBody(id, key string) string {
	e.t.Helper()
	r := e.do("POST", "/v1/npcs/"+id+"/tick", "", "Idempotency-Key", key)
	if r.status != http.StatusOK {
		e.t.Fatalf("tick %s with key %q = %d %s", id, key, r.status, r.body)
	}
	return string(r.body)
}

func TestIdempotencyKeyReturnsTheStoredAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{tick: tick.Config{MaxEventsPerTick: 1}})
	e.put("brom", bromSettings())
	e.say("brom", "e1", "Good morning, smith!")
	e.say("brom", "e2", "Can you mend my sword?")

	first := e.tickBody("brom", "turn-1")
	var res TickResult
	if err := json.Unmarshal([]byte(first), &res); err != nil {
		t.Fatal(err)
	}
	if res.Idle || len(res.Actions) == 0 || res.Tick != 1 {
		t.Fatalf("first tick = %s, want tick 1 with actions", first)
	}
	// e2 is still pending, so a second real tick would do something: the
	// retry must not.
	if again := e.tickBody("brom", "turn-1"); again != first {
		t.Errorf("retry with the same key answered\n%s\nwant\n%s", again, first)
	}
	if n := e.tickRecords("brom"); n != 1 {
		t.Errorf("%d ticks committed after a retried key, want 1", n)
	}
	// A new key ticks.
	var second TickResult
	if err := json.Unmarshal([]byte(e.tickBody("brom", "turn-2")), &second); err != nil {
		t.Fatal(err)
	}
	if second.Tick != 2 || second.Idle {
		t.Errorf("tick with a new key = tick %d idle %v, want tick 2", second.Tick, second.Idle)
	}

	// An idle answer under a key is kept: events arriving afterwards do not
	// change what its retry says.
	idle := e.tickBody("brom", "idle-1")
	if !strings.Contains(idle, `"idle":true`) {
		t.Fatalf("tick with nothing pending = %s, want idle", idle)
	}
	e.say("brom", "e3", "Hello again.")
	if again := e.tickBody("brom", "idle-1"); again != idle {
		t.Errorf("retry of an idle keyed tick = %s, want %s", again, idle)
	}
	if n := e.tickRecords("brom"); n != 2 {
		t.Errorf("%d ticks committed, want 2", n)
	}
	// Keys are per NPC.
	e.put("mira", NPCSettings{Name: "Mira", Persona: "You are Mira, a cheerful baker."})
	e.say("mira", "m1", "Bread?")
	if got := e.tickBody("mira", "turn-1"); !strings.Contains(got, `"npc":"mira"`) || !strings.Contains(got, `"idle":false`) {
		t.Errorf("mira's tick with brom's key = %s, want mira's own tick", got)
	}

	for _, key := range []string{"has space", strings.Repeat("k", 129), "tab\tkey", "ünï"} {
		r := e.do("POST", "/v1/npcs/brom/tick", "", "Idempotency-Key", key)
		if r.status != http.StatusBadRequest || !strings.Contains(errorOf(t, r).Message, "Idempotency-Key") {
			t.Errorf("key %q = %d %s, want 400 naming Idempotency-Key", key, r.status, r.body)
		}
	}
}

func TestIdempotencyKeyConcurrentRetriesTickOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{tick: tick.Config{MaxEventsPerTick: 1}})
	e.put("brom", bromSettings())
	for i := range 4 {
		e.say("brom", fmt.Sprintf("e%d", i), fmt.Sprintf("Question number %d?", i))
	}
	// A second engine over the same database stands for a second npcd
	// process: it shares no lock with the first.
	other, err := tick.New(tick.Deps{DB: e.db, Characters: e.chars, Journal: e.jour, Internals: tools.NewInternals(e.jour, e.chars),
		Retriever: e.jour, Builtin: llm.NewBuiltin()}, tick.Config{MaxEventsPerTick: 1})
	if err != nil {
		t.Fatal(err)
	}
	const callers = 8
	bodies := make([]string, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				bodies[i] = strings.TrimSpace(e.tickBody("brom", "same"))
				return
			}
			res, err := other.TickWithKey(context.Background(), "brom", "same")
			if err != nil {
				t.Errorf("other engine: %v", err)
				return
			}
			b, _ := json.Marshal(res)
			bodies[i] = string(b)
		}()
	}
	wg.Wait()
	if n := e.tickRecords("brom"); n != 1 {
		t.Fatalf("%d ticks committed by %d concurrent calls with one key, want 1", n, callers)
	}
	for i, b := range bodies {
		if b != bodies[0] {
			t.Errorf("caller %d got\n%s\nwant\n%s", i, b, bodies[0])
		}
	}
}

// lossyTransport performs requests but loses the answer of those it is
// told to, as a game whose call timed out after npcd committed.
type lossyTransport struct {
	base http.RoundTripper
	lose bool
}

var errLost = errors.New("response lost")

func (l *lossyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(r)
	if err != nil || !l.lose {
		return resp, err
	}
	resp.Body.Close()
	return nil, errLost
}

func TestLostTickAnswerIsFetchedAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	e.put("brom", bromSettings())
	e.say("brom", "e1", "Good morning, smith!")

	lossy := NewClient(e.ts.URL, "", &http.Client{Transport: &lossyTransport{base: e.ts.Client().Transport, lose: true}})
	if _, err := lossy.TickWithKey(ctx, "brom", "k1"); !errors.Is(err, errLost) {
		t.Fatalf("tick through a lossy transport: %v, want the answer lost", err)
	}
	// The game asks again by tick, by key, and through the feed; all three
	// agree on the actions it missed.
	byTick, err := e.client.GetTick(ctx, "brom", 1)
	if err != nil {
		t.Fatal(err)
	}
	if byTick.Idle || len(byTick.Actions) == 0 || byTick.Actions[0].Tool != "say" {
		t.Fatalf("GET tick 1 = %+v, want the committed say", byTick)
	}
	byKey, err := e.client.TickWithKey(ctx, "brom", "k1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(byTick, byKey, cmp.AllowUnexported(tick.Result{})); diff != "" {
		t.Errorf("retry by key differs from GET by tick (-tick +key):\n%s", diff)
	}
	feed, err := e.client.Actions(ctx, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(feed.Ticks) != 1 || !cmp.Equal(feed.Ticks[0].Actions, byTick.Actions) {
		t.Errorf("feed = %+v, want the one tick with %+v", feed, byTick.Actions)
	}
	if n := e.tickRecords("brom"); n != 1 {
		t.Errorf("%d ticks committed, want 1", n)
	}

	for _, tt := range []struct {
		path   string
		status int
		msg    string
	}{
		{"/v1/npcs/brom/ticks/2", 404, `npc "brom" has no committed tick 2`},
		{"/v1/npcs/ghost/ticks/1", 404, `npc "ghost" does not exist`},
		{"/v1/npcs/brom/ticks/0", 400, "{tick}: must be a positive integer"},
		{"/v1/npcs/brom/ticks/one", 400, "{tick}: must be a positive integer"},
	} {
		r := e.do("GET", tt.path, "")
		if r.status != tt.status || !strings.Contains(errorOf(t, r).Message, tt.msg) {
			t.Errorf("GET %s = %d %s, want %d %q", tt.path, r.status, r.body, tt.status, tt.msg)
		}
	}
}

func TestActionFeed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	npcs := []string{"brom", "mira", "olaf"}
	for _, id := range npcs {
		e.put(id, NPCSettings{Name: strings.ToUpper(id[:1]) + id[1:], Persona: "You are a villager of Oakvale."})
	}
	// Three rounds of every NPC ticking: nine ticks with actions.
	for round := range 3 {
		for _, id := range npcs {
			e.say(id, fmt.Sprintf("%s-%d", id, round), fmt.Sprintf("Round %d: how are you?", round))
		}
		if _, err := e.client.TickMany(ctx, npcs); err != nil {
			t.Fatal(err)
		}
	}

	// A game reading two at a time, "restarting" (a new client) after each
	// page with only the cursor it stored, loses nothing.
	var cursor int64
	seen := map[string][]int64{}
	last := int64(0)
	for page := 0; ; page++ {
		c := NewClient(e.ts.URL, "", e.ts.Client())
		f, err := c.Actions(ctx, cursor, 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Ticks) == 0 {
			if f.Cursor != cursor {
				t.Errorf("empty page moved the cursor from %d to %d", cursor, f.Cursor)
			}
			break
		}
		if len(f.Ticks) > 2 {
			t.Fatalf("page of %d ticks with limit 2", len(f.Ticks))
		}
		for _, ft := range f.Ticks {
			if ft.Cursor <= last {
				t.Errorf("cursor %d after %d: not increasing", ft.Cursor, last)
			}
			last = ft.Cursor
			if len(ft.Actions) == 0 {
				t.Errorf("%s tick %d in the feed without actions", ft.NPC, ft.Tick)
			}
			seen[ft.NPC] = append(seen[ft.NPC], ft.Tick)
		}
		if f.Cursor != last {
			t.Errorf("page cursor %d, want its last tick's %d", f.Cursor, last)
		}
		cursor = f.Cursor
		if page > 10 {
			t.Fatal("feed does not end")
		}
	}
	for _, id := range npcs {
		if diff := cmp.Diff([]int64{1, 2, 3}, seen[id]); diff != "" {
			t.Errorf("%s's ticks in the feed (-want +got):\n%s", id, diff)
		}
	}

	// Filtered by NPC.
	f, err := e.client.Actions(ctx, 0, 0, 0, "mira")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Ticks) != 3 || f.Ticks[0].NPC != "mira" || f.Ticks[2].NPC != "mira" {
		t.Errorf("feed of mira = %+v, want her 3 ticks", f.Ticks)
	}

	// A long poll wakes up for the next commit.
	got := make(chan *Feed, 1)
	go func() {
		f, err := e.client.Actions(ctx, cursor, 0, 20*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- f
	}()
	time.Sleep(50 * time.Millisecond) // let the poll start waiting (it is correct either way)
	e.say("olaf", "late", "Still there?")
	if _, err := e.client.Tick(ctx, "olaf"); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-got:
		if f == nil || len(f.Ticks) != 1 || f.Ticks[0].NPC != "olaf" || f.Ticks[0].Tick != 4 {
			t.Errorf("long poll = %+v, want olaf's tick 4", f)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("long poll did not wake up for a commit")
	}

	// Idle ticks, keyed or not, are not in the feed.
	e.tickBody("brom", "idle-key")
	if _, err := e.client.Tick(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	if f, err := e.client.Actions(ctx, last+1, 0, 0); err != nil || len(f.Ticks) != 0 {
		t.Errorf("feed after idle ticks = %+v, %v; want nothing", f, err)
	}

	for _, tt := range []struct{ query, msg string }{
		{"after=-1", "after: must be a cursor"},
		{"after=x", "after: must be a cursor"},
		{"limit=0", "limit: must be an integer between 1 and 1000"},
		{"wait=2m", "wait: must be a duration"},
		{"wait=soon", "wait: must be a duration"},
		{"npc=Brom", "npc: must be npc ids"},
		{"npc=brom,,mira", "npc: must be npc ids"},
		{"cursor=3", "cursor: unknown query parameter"},
	} {
		r := e.do("GET", "/v1/actions?"+tt.query, "")
		if r.status != http.StatusBadRequest || !strings.Contains(errorOf(t, r).Message, tt.msg) {
			t.Errorf("GET /v1/actions?%s = %d %s, want 400 %q", tt.query, r.status, r.body, tt.msg)
		}
	}
}

// Cursors are never handed out twice, even when the newest ticks go with a
// deleted NPC: a game holding such a cursor must still see what comes next.
func TestFeedCursorNotReusedAfterDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	e.put("brom", bromSettings())
	e.put("mira", NPCSettings{Name: "Mira", Persona: "You are Mira, a cheerful baker."})
	e.say("brom", "b1", "Hello!")
	if _, err := e.client.Tick(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	f, err := e.client.Actions(ctx, 0, 0, 0)
	if err != nil || len(f.Ticks) != 1 {
		t.Fatalf("feed = %+v, %v", f, err)
	}
	held := f.Cursor
	if err := e.client.DeleteNPC(ctx, "brom"); err != nil {
		t.Fatal(err)
	}
	e.say("mira", "m1", "Hello!")
	if _, err := e.client.Tick(ctx, "mira"); err != nil {
		t.Fatal(err)
	}
	f, err = e.client.Actions(ctx, held, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Ticks) != 1 || f.Ticks[0].NPC != "mira" || f.Ticks[0].Cursor <= held {
		t.Errorf("feed after cursor %d = %+v, want mira's tick with a greater cursor", held, f.Ticks)
	}
}

func TestCreateOnlyPut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	first := `{"name": "Brom", "persona": "You are Brom, the blacksmith."}`
	r := e.do("PUT", "/v1/npcs/brom", first, "If-None-Match", "*")
	if r.status != http.StatusCreated {
		t.Fatalf("create-only PUT of a new npc = %d %s, want 201", r.status, r.body)
	}
	// An edit made since, then the game's registration at its next start.
	edited := bromSettings()
	edited.Persona = "You are Brom, the blacksmith, who lost his hammer."
	e.put("brom", edited)
	r = e.do("PUT", "/v1/npcs/brom", first, "If-None-Match", "*")
	if r.status != http.StatusPreconditionFailed || errorOf(t, r).Code != CodeExists {
		t.Fatalf("create-only PUT of an existing npc = %d %s, want 412 exists", r.status, r.body)
	}
	got, err := e.client.GetNPC(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if got.Persona != edited.Persona {
		t.Errorf("persona after a refused create = %q, want the edit %q kept", got.Persona, edited.Persona)
	}
	r = e.do("PUT", "/v1/npcs/brom", first, "If-None-Match", `"v1"`)
	if r.status != http.StatusBadRequest || !strings.Contains(errorOf(t, r).Message, "If-None-Match") {
		t.Errorf("PUT with If-None-Match \"v1\" = %d %s, want 400 naming If-None-Match", r.status, r.body)
	}
	// The client's create-only call.
	if _, err := e.client.CreateNPC(ctx, "brom", bromSettings()); err == nil {
		t.Error("CreateNPC of an existing npc succeeded")
	} else {
		wantAPIError(t, err, http.StatusPreconditionFailed, CodeExists)
	}
	npc, err := e.client.CreateNPC(ctx, "mira", NPCSettings{Name: "Mira", Persona: "You are Mira."})
	if err != nil || npc.ID != "mira" {
		t.Errorf("CreateNPC of a new npc = %+v, %v", npc, err)
	}
}

// bromAndMiraWaiting is a daemon with two NPCs, Brom and Mira, each with
// one line said to it and not yet ticked.
func bromAndMiraWaiting(t *testing.T) *env {
	e := newEnv(t, envOpts{})
	e.put("brom", bromSettings())
	e.put("mira", NPCSettings{Name: "Mira", Persona: "You are Mira, a cheerful baker."})
	e.say("brom", "b1", "Hello!")
	e.say("mira", "m1", "Bread?")
	return e
}

func TestBatchTickBadIDFailsAlone(t *testing.T) {
	t.Parallel()
	e := bromAndMiraWaiting(t)

	r := e.do("POST", "/v1/tick", `{"npcs": ["Bad!", "brom", "ghost"]}`)
	if r.status != http.StatusOK {
		t.Fatalf("batch with a bad id = %d %s, want 200", r.status, r.body)
	}
	var out BatchTickResponse
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 1 || out.Results[0].NPC != "brom" || out.Results[0].Idle {
		t.Errorf("results = %+v, want brom ticked", out.Results)
	}
	want := []BatchError{
		{NPC: "Bad!", Code: CodeBadRequest, Error: "npcs[0]: must be 1-64 characters of a-z 0-9 _ -"},
		{NPC: "ghost", Code: CodeNotFound, Error: `npc "ghost" does not exist`},
	}
	if diff := cmp.Diff(want, out.Errors); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}

	// Only bad ids: nothing ticks, not even the NPCs with pending events
	// (an empty list would mean all of them).
	r = e.do("POST", "/v1/tick", `{"npcs": ["Bad!"]}`)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"results":[]`) {
		t.Errorf("batch of one bad id = %d %s, want no results", r.status, r.body)
	}
	if n := e.tickRecords("mira"); n != 0 {
		t.Errorf("mira ticked %d times by a batch naming only a bad id", n)
	}

	// Keys in a batch.
	first := e.do("POST", "/v1/tick", `{"npcs": ["mira"], "keys": {"mira": "boot-7"}}`)
	e.say("mira", "m2", "More bread?")
	again := e.do("POST", "/v1/tick", `{"npcs": ["mira"], "keys": {"mira": "boot-7"}}`)
	if first.status != 200 || string(first.body) != string(again.body) || e.tickRecords("mira") != 1 {
		t.Errorf("keyed batch retry = %s, first %s, %d ticks; want the same answer and 1 tick", again.body, first.body, e.tickRecords("mira"))
	}
	for _, tt := range []struct{ body, msg string }{
		{`{"npcs": ["mira"], "keys": {"brom": "k"}}`, "keys.brom: names no npc of npcs"},
		{`{"keys": {"brom": "k"}}`, "keys.brom: names no npc of npcs"},
		{`{"npcs": ["mira"], "keys": {"mira": "a b"}}`, "keys.mira: must be 1-128 printable ASCII"},
	} {
		r := e.do("POST", "/v1/tick", tt.body)
		if r.status != http.StatusBadRequest || !strings.Contains(errorOf(t, r).Message, tt.msg) {
			t.Errorf("POST /v1/tick %s = %d %s, want 400 %q", tt.body, r.status, r.body, tt.msg)
		}
	}
}
