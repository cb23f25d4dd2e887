package character_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
)

// The hot reads of a tick run through statements of their own on SQLite
// (the Store's prepared handle) and through gorm elsewhere and inside a
// transaction; both read the same.
func TestHotReadsReadAsTheOrdinaryOnes(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putNPC(t, s, "brom")
	putNPC(t, s, "mara")
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for _, f := range []character.Fact{
		{Entity: "alice", Key: "home", Content: "lives in Oakvale", ValidFrom: at},
		{Entity: "alice", Key: "home", Content: "moved to Riverton", ValidFrom: at.Add(time.Hour),
			Sources: store.NewJSON(character.Sources{MessageIDs: []int64{3}, EventRefs: []string{"e1"}})},
		{Entity: "alice", Content: "has a red scarf", ValidFrom: at},
		{Entity: "bob", Content: "owes me 5 gold", ValidFrom: at},
	} {
		if _, _, err := s.AddFact(ctx, "brom", f); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.AddFact(ctx, "mara", character.Fact{Entity: "alice", Content: "mara's own belief"}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []character.ProfileUpdate{
		{Entity: "carol", Kind: "player", SeenAt: at, RelationshipDelta: map[string]float64{"trust": 0.25}},
		{Entity: "Alice", Description: "a smith", SeenAt: at.Add(time.Minute)},
		{Entity: character.ActorKey("p-7"), Name: "Dora", SeenAt: at},
	} {
		if _, err := s.UpsertProfile(ctx, "brom", u); err != nil {
			t.Fatal(err)
		}
	}
	ref := "r-1"
	if _, _, err := s.AddEvents(ctx, "brom", []character.Event{
		{Kind: "say", Actor: "alice", ActorID: "p-1", Target: "brom", Text: "hello", Room: "forge", At: at, Ref: &ref},
		{Kind: "emote", Actor: "bob", Text: "waves", At: at.Add(time.Second)},
		{Kind: "say", Actor: "carol", Text: "hi", At: at.Add(2 * time.Second)},
	}, 0); err != nil {
		t.Fatal(err)
	}
	evs, err := s.PendingEvents(ctx, "brom", 3)
	if err != nil {
		t.Fatal(err)
	}
	msgID := int64(1)
	if err := s.ConsumeEvents(ctx, "brom", []int64{evs[0].Seq}, 1, msgID); err != nil {
		t.Fatal(err)
	}

	// A Store made by WithTx keeps no prepared handle: it reads through gorm.
	var ordinary *character.Store
	check := func(t *testing.T, name string, read func(s *character.Store) (any, error)) {
		t.Helper()
		want, err := read(ordinary)
		if err != nil {
			t.Fatal(err)
		}
		got, err := read(s)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-ordinary +hot):\n%s", name, diff)
		}
	}
	err = s.DB().Transaction(func(tx *gorm.DB) error {
		ordinary = s.WithTx(tx)
		for _, ents := range [][]string{{"alice"}, {"Alice", "carol", "nobody"}, {"bob", "carol", "dora", "@p-7", "alice"}, {"nobody"}} {
			check(t, "Profiles", func(s *character.Store) (any, error) { return s.Profiles(ctx, "brom", ents...) })
		}
		for _, limit := range []int{1, 2, 5} {
			check(t, "PendingEvents", func(s *character.Store) (any, error) { return s.PendingEvents(ctx, "brom", limit) })
		}
		check(t, "Intake", func(s *character.Store) (any, error) { return s.Intake(ctx, "brom") })
		check(t, "PendingEvents of an NPC without any", func(s *character.Store) (any, error) { return s.PendingEvents(ctx, "mara", 5) })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
