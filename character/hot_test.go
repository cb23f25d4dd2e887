package character_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/schema"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/store"
)

// glanced is what GlanceEvents returns, without the marks, which only the
// statement of its own reads (see TestGlanceEventsReadsTheMarks).
type glanced struct {
	G      *character.Glance
	Events []character.Event
}

func glancedOf(g *character.Glance, evs []character.Event) glanced {
	if g != nil {
		g.Marked, g.NewestEntry, g.MemoryRev, g.ProfileRev = false, 0, 0, 0
	}
	return glanced{g, evs}
}

// wholeDB opens a database with the schema of the whole daemon, whose
// tables GlanceEvents reads the NPC's marks from.
func wholeDB(t *testing.T) *gorm.DB {
	t.Helper()
	return migratedDB(t, schema.Migrations())
}

// GlanceEvents reads, on SQLite, the NPC's newest journal entry's id and
// memory revision with its glance, at the same instant: 0 before the
// first, and the NPC's own, not another's.
func TestGlanceEventsReadsTheMarks(t *testing.T) {
	ctx := context.Background()
	db := wholeDB(t)
	s := character.NewStore(db)
	js := journal.NewStore(db)
	putNPC(t, s, "brom")
	putNPC(t, s, "mara")
	for _, id := range []string{"brom", "mara"} {
		if _, _, err := s.AddEvents(ctx, id, []character.Event{{Kind: "say", Actor: "alice", Text: "hello"}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	marks := func(id string) (bool, int64, int64) {
		t.Helper()
		g, evs, err := s.GlanceEvents(ctx, id, 5)
		if err != nil || len(evs) != 1 {
			t.Fatal(evs, err)
		}
		return g.Marked, g.NewestEntry, g.MemoryRev
	}
	if !store.IsSQLite(db) {
		if marked, _, _ := marks("brom"); marked {
			t.Fatal("a glance that is two statements read marks")
		}
		return
	}
	if marked, newest, rev := marks("brom"); !marked || newest != 0 || rev != 0 {
		t.Fatalf("before any entry or memory: marked %v, newest entry %d, memory revision %d; want true, 0, 0", marked, newest, rev)
	}
	var last int64
	for i := range 3 {
		e := &journal.Entry{Type: journal.TypeObservation, Content: fmt.Sprintf("saw the smith %d", i), Importance: 5}
		if err := js.Add(ctx, "brom", e); err != nil {
			t.Fatal(err)
		}
		last = e.ID
		if err := js.Add(ctx, "mara", &journal.Entry{Type: journal.TypeObservation, Content: "saw the miller", Importance: 5}); err != nil {
			t.Fatal(err)
		}
		if _, err := js.AddMemory(ctx, "brom", &journal.Memory{Content: fmt.Sprintf("the smith owes %d crowns", i+1), Importance: 5}); err != nil {
			t.Fatal(err)
		}
	}
	if marked, newest, rev := marks("brom"); !marked || newest != last || rev != 3 {
		t.Fatalf("after 3 entries and 3 memories: marked %v, newest entry %d, memory revision %d; want true, %d, 3", marked, newest, rev, last)
	}
	if marked, newest, rev := marks("mara"); !marked || newest <= last || rev != 0 {
		t.Fatalf("mara: marked %v, newest entry %d, memory revision %d; want true, above %d, 0", marked, newest, rev, last)
	}
}

// The hot reads of a tick run through statements of their own on SQLite
// (the Store's prepared handle) and through gorm elsewhere and inside a
// transaction; both read the same.
func TestHotReadsReadAsTheOrdinaryOnes(t *testing.T) {
	ctx := context.Background()
	s := character.NewStore(wholeDB(t))
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
	ref, ref2 := "r-1", "r-2"
	if _, _, err := s.AddEvents(ctx, "brom", []character.Event{
		{Kind: "say", Actor: "alice", ActorID: "p-1", Target: "brom", Text: "hello", Room: "forge", At: at, Ref: &ref},
		{Kind: "emote", Actor: "bob", Text: "waves", At: at.Add(time.Second)},
		{Kind: "say", Actor: "carol", ActorID: "p-3", Target: "brom", Text: "hi", Room: "forge", At: at.Add(2 * time.Second), Ref: &ref2},
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
	if err := s.UpdateState(ctx, "brom", map[string]any{"game_time": at.Add(time.Minute), "last_sleep_at": at.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	reads := func(t *testing.T) {
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
			for _, id := range []string{"brom", "mara"} {
				for _, limit := range []int{1, 2, 5} {
					check(t, "GlanceEvents", func(s *character.Store) (any, error) {
						g, evs, err := s.GlanceEvents(ctx, id, limit)
						return glancedOf(g, evs), err
					})
				}
			}
			for _, id := range []string{"brom", "mara"} {
				check(t, "State", func(s *character.Store) (any, error) { return s.State(ctx, id) })
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// AdvanceState returns the times it leaves as State reads them.
		want, err := s.State(ctx, "brom")
		if err != nil {
			t.Fatal(err)
		}
		var got character.State
		err = s.DB().Transaction(func(tx *gorm.DB) error {
			got, _, err = s.WithTx(tx).AdvanceState(ctx, "brom", map[string]any{"tick": want.State.Tick + 1}, character.HistoryDelta{}, 0)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		want.State.Tick++
		if diff := cmp.Diff(want.State, got); diff != "" {
			t.Errorf("AdvanceState (-State +AdvanceState):\n%s", diff)
		}
	}
	reads(t)
	if !store.IsSQLite(s.DB()) {
		return
	}
	// Older rows hold their times in the other layouts SQLite's driver
	// reads; they read as they did. Each layout is made of the one
	// written, the last one for good.
	columns := map[string][]string{
		"characters": {"game_time", "last_sleep_at", "created_at", "updated_at"},
		"events":     {"at", "received_at", "consumed_at"},
		"profiles":   {"first_seen", "last_seen", "updated_at"},
		"facts":      {"valid_from", "superseded_at", "created_at"},
	}
	for _, layout := range []struct{ name, from, to string }{
		{"time.Time.String", "+00:00", " +0000 UTC"},
		{"T", " ", "T"},
		{"Z", "+00:00", "Z"},
		{"no zone", "+00:00", ""},
	} {
		rewrite := func(t *testing.T, from, to string) {
			for table, cols := range columns {
				for _, col := range cols {
					q := fmt.Sprintf("UPDATE %s SET %s = replace(%s, ?, ?)", table, col, col)
					if err := s.DB().Exec(q, from, to).Error; err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		t.Run(layout.name, func(t *testing.T) {
			rewrite(t, layout.from, layout.to)
			reads(t)
			if layout.to != "" {
				rewrite(t, layout.to, layout.from) // back to the layout written
			}
		})
	}
}

// A tool result is measured before its insert with the id it is expected
// to get; whether the guess holds or not (another writer took ids in
// between), the stored counts are those of the id it got.
func TestToolResultsAreMeasuredWithTheirIDs(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	s := character.NewStore(db)
	other := character.NewStore(db) // a writer s does not see
	putNPC(t, s, "brom")
	long := strings.Repeat("the forge is hot and the bellows are loud. ", 200) // offloaded
	check := func(t *testing.T) {
		t.Helper()
		ms, err := s.History(ctx, "brom", character.HistoryQuery{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			want := m
			character.Measure(&want, counter, character.DefaultOffloadBytes)
			if m.Tokens != want.Tokens || m.ViewTokens != want.ViewTokens || m.MaskTokens != want.MaskTokens || m.Offloaded != want.Offloaded {
				t.Errorf("message %d (%s) stored %d/%d/%d/%v, measures %d/%d/%d/%v", m.ID, m.Role, m.Tokens, m.ViewTokens, m.MaskTokens,
					m.Offloaded, want.Tokens, want.ViewTokens, want.MaskTokens, want.Offloaded)
			}
		}
		checkTotals(t, s, "brom")
	}
	call := character.ToolCall{ID: "c1", Name: "look", Args: "{}"}
	round := func(turn int64) {
		appendMsgs(t, s, "brom", assistant(turn, call), toolResult(turn, "c1", "look", "a small forge"),
			toolResult(turn, "c2", "look", long))
	}
	round(1) // nothing guessed yet
	round(2) // the guess holds
	check(t)
	for i := range 3 { // the ids move on past the guess
		appendMsgs(t, other, "brom", user(3, fmt.Sprintf("filler %d", i)))
	}
	round(4) // the guess is wrong
	check(t)
	// By many digits' worth, so the counts of the placeholders differ.
	putNPC(t, s, "mara")
	if err := db.Create(&character.Message{ID: 123456789012, CharacterID: "mara", State: character.StateLive, Role: "user"}).Error; err != nil {
		t.Fatal(err)
	}
	round(4) // the guess is wrong
	round(5)
	check(t)
}

// InsertMeasured stores the counts its caller measured, but measures tool
// results itself, with the ids they get: the caller measured none of
// them (a count held by a tool result is not taken), and the delta adds
// up what was stored.
func TestInsertMeasuredMeasuresOnlyToolResults(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	s := character.NewStore(db)
	putNPC(t, s, "brom")
	appendMsgs(t, s, "brom", user(1, "filler")) // the next ids are guessed
	said := user(2, "Have you seen my sword?")
	said.Tokens, said.ViewTokens, said.MaskTokens = 41, 42, 43 // as its caller measured it
	call := character.ToolCall{ID: "c1", Name: "look", Args: "{}"}
	asked := assistant(2, call)
	character.Measure(asked, counter, character.DefaultOffloadBytes)
	seen := toolResult(2, "c1", "look", strings.Repeat("the forge is hot and the bellows are loud. ", 200))
	seen.Tokens, seen.ViewTokens, seen.MaskTokens = 1, 1, 1 // not measured: stale
	var d character.HistoryDelta
	err := db.Transaction(func(tx *gorm.DB) error {
		var err error
		d, err = s.WithTx(tx).InsertMeasured(ctx, "brom", []*character.Message{said, asked, seen}, counter, character.DefaultOffloadBytes)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := s.History(ctx, "brom", character.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 4 {
		t.Fatalf("%d messages stored, want 4", len(ms))
	}
	if m := ms[1]; m.Tokens != 41 || m.ViewTokens != 42 || m.MaskTokens != 43 {
		t.Errorf("the user message stored %d/%d/%d, want the caller's 41/42/43", m.Tokens, m.ViewTokens, m.MaskTokens)
	}
	want := ms[3]
	character.Measure(&want, counter, character.DefaultOffloadBytes)
	if m := ms[3]; m.Tokens != want.Tokens || m.ViewTokens != want.ViewTokens || m.MaskTokens != want.MaskTokens || !m.Offloaded || m.Tokens < 100 {
		t.Errorf("the tool result (id %d) stored %d/%d/%d/%v, measures %d/%d/%d/%v", m.ID, m.Tokens, m.ViewTokens, m.MaskTokens, m.Offloaded,
			want.Tokens, want.ViewTokens, want.MaskTokens, want.Offloaded)
	}
	sum := 0
	for _, m := range ms[1:] {
		sum += m.PromptTokens()
	}
	if d.LiveTokens != sum || d.LiveMessages != 3 {
		t.Errorf("delta %d tokens in %d messages, the rows %d in 3", d.LiveTokens, d.LiveMessages, sum)
	}
}
