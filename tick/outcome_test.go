package tick

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// A daemon shutting down stops the feed's long polls, so they do not hold
// the shutdown for their whole wait.
func TestStopFeedEndsLongPolls(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if _, err := env.eng.PutNPC(ctx, brom()); err != nil {
		t.Fatal(err)
	}
	got := make(chan *Feed, 1)
	go func() {
		f, err := env.eng.Actions(ctx, FeedQuery{Wait: MaxFeedWait})
		if err != nil {
			t.Error(err)
		}
		got <- f
	}()
	time.Sleep(20 * time.Millisecond) // let it wait (the test holds either way)
	env.eng.StopFeed()
	select {
	case f := <-got:
		if f == nil || len(f.Ticks) != 0 || f.Cursor != 0 {
			t.Errorf("stopped poll = %+v, want an empty page at cursor 0", f)
		}
	case <-time.After(MaxFeedWait - 5*time.Second):
		t.Fatal("StopFeed did not end a waiting poll")
	}
	env.eng.StopFeed() // twice is harmless

	// Reads still answer, with what is committed.
	if _, _, err := env.eng.PostEvents(ctx, "brom", []EventInput{{ID: "e1", Kind: "say", Actor: "alice", Text: "Hello!"}}); err != nil {
		t.Fatal(err)
	}
	res, err := env.eng.Tick(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	f, err := env.eng.Actions(ctx, FeedQuery{Wait: MaxFeedWait})
	if err != nil || len(f.Ticks) != 1 || f.Ticks[0].Tick != res.Tick || len(f.Ticks[0].Actions) != len(res.Actions) {
		t.Errorf("feed after StopFeed = %+v, %v; want tick %d", f, err, res.Tick)
	}
}

// The stored answer of a tick is its JSON encoding, exactly.
func TestOutcomeBodyIsTheResultsJSON(t *testing.T) {
	res := &Result{NPC: "brom", Tick: 7, Text: "<b>Aye</b> & \"more\"", Actions: []Action{{CallID: "c1", Tool: "say", Args: map[string]any{"text": "hi\nthere"}}},
		Awaiting: []string{}, Warnings: []string{"w"}}
	o, err := outcomeOf(res, "k", time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if o.Body != string(want) || o.Key == nil || *o.Key != "k" {
		t.Fatalf("stored body %q, want %q", o.Body, want)
	}
}
