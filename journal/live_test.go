package journal

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// TestSearchTakesShownMessagesFromTheLiveHistory checks that a search
// given the NPC's live history (SearchOptions.Live) reads none of the
// messages it holds, and shows exactly what a search reading them shows:
// for messages with and without event refs, stamped ones, a game time
// finer than PostgreSQL keeps and out of UTC, and a summary held first.
// The messages it does not hold, and those of a history that is not the
// NPC's, are read as before.
func TestSearchTakesShownMessagesFromTheLiveHistory(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	at := t0.Add(123456789 * time.Nanosecond).In(time.FixedZone("east", 3*3600))
	msgs := []*character.Message{
		{Role: llm.RoleUser, Turn: 1, GameTime: at, Content: `[2026-11-21 10:00] alice says: "My sword is lost, the one with the red hilt."`,
			EventRefs: store.NewJSON([]string{"ev-1"})},
		{Role: llm.RoleAssistant, Turn: 1, GameTime: at, Content: "I have not seen your sword, Alice."},
		{Role: llm.RoleUser, Turn: 2, GameTime: at.Add(time.Minute), Content: "bob says: the sword was at the forge",
			EventRefs: store.NewJSON([]string{"ev-2", "ev-3"})},
		{Role: llm.RoleUser, Turn: 3, GameTime: at.Add(2 * time.Minute), Content: `[2026-11-21 10:02] carol says: "A sword? Ask the smith."`},
		{Role: llm.RoleSystem, Summary: true, Turn: 3, GameTime: at, Content: character.SummaryPrefix + " Alice lost her sword."},
	}
	if err := e.chars.AppendMessages(ctx, "brom", msgs, llm.NewCounter(""), 0); err != nil {
		t.Fatal(err)
	}
	// The history as a tick holds it after writing these: the summary
	// first, the messages as they were written.
	live := []character.Message{*msgs[4], *msgs[0], *msgs[1], *msgs[2], *msgs[3]}

	var reads atomic.Int64
	e.jour.onLoad = func(k itemKind) {
		if k == kindMessage {
			reads.Add(1)
		}
	}
	defer func() { e.jour.onLoad = nil }()
	// fresh is a retriever whose refresh keeps no rows: what a search shows
	// is read or held.
	fresh := func() *Retriever {
		r := e.retriever(t)
		r.cfg.keepBytes = 0
		return r
	}
	search := func(r *Retriever, live []character.Message) ([]Result, int64) {
		t.Helper()
		reads.Store(0)
		rs, err := r.SearchWith(ctx, "brom", "sword", 5, SearchOptions{Live: live})
		if err != nil {
			t.Fatal(err)
		}
		return rs, reads.Load()
	}
	read, n := search(fresh(), nil)
	if n == 0 {
		t.Fatal("a search without the live history read no message rows; the test counts the wrong statement")
	}
	shown := 0
	for _, r := range read {
		if r.Kind == KindMessage {
			shown++
		}
	}
	if shown < 3 {
		t.Fatalf("the search shows %d messages, want the test's at least 3: %+v", shown, read)
	}
	r := fresh()
	held, n := search(r, live)
	if n != 0 {
		t.Errorf("a search given the live history read message rows %d times, want none", n)
	}
	if diff := cmp.Diff(read, held); diff != "" {
		t.Errorf("messages taken from the live history show otherwise than read (-read +held):\n%s", diff)
	}
	// They are kept as rows read are: the same search without the
	// history, once a compaction archived them, reads none of them.
	again, n := search(r, nil)
	if n != 0 {
		t.Errorf("a search after one given the live history read message rows %d times, want none: it kept none", n)
	}
	if diff := cmp.Diff(read, again); diff != "" {
		t.Errorf("messages kept from the live history show otherwise than read (-read +kept):\n%s", diff)
	}
	part, n := search(fresh(), live[3:]) // the two newest only
	if n == 0 {
		t.Error("a search given part of the history read no rows, though it shows messages the part does not hold")
	}
	if diff := cmp.Diff(read, part); diff != "" {
		t.Errorf("with part of the history held (-read +part):\n%s", diff)
	}
	other := make([]character.Message, len(live))
	copy(other, live)
	for i := range other {
		other[i].CharacterID = "someone"
		other[i].Content = "a sword of someone else"
	}
	foreign, n := search(fresh(), other)
	if n == 0 {
		t.Error("a search given another NPC's history read no rows")
	}
	if diff := cmp.Diff(read, foreign); diff != "" {
		t.Errorf("with another NPC's history (-read +given):\n%s", diff)
	}
}
