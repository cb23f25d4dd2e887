package character_test

import (
	"context"
	"errors"
	"gorm.io/gorm"
	"strings"
	"testing"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/store"
)

// A database made before tick outcomes were stored gains their table, and
// the store then keeps, finds and orders outcomes.
func TestOutcomesMigrationAndStore(t *testing.T) {
	ctx := context.Background()
	db := dbtest.Open(t)
	migs := character.Migrations()
	if err := store.Migrate(ctx, db, migs[:2]); err != nil {
		t.Fatal(err)
	}
	if db.Migrator().HasTable(&character.TickOutcome{}) {
		t.Fatal("versions 1-2 already have the outcomes table; the upgrade is not tested")
	}
	if err := store.Migrate(ctx, db, migs); err != nil {
		t.Fatal(err)
	}
	// Cursors must never be reused once the newest rows are deleted: on
	// SQLite that takes AUTOINCREMENT (a PostgreSQL sequence never goes
	// back).
	if store.IsSQLite(db) {
		var ddl string
		if err := db.Raw("SELECT sql FROM sqlite_master WHERE name = 'tick_outcomes'").Scan(&ddl).Error; err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.ToUpper(ddl), "AUTOINCREMENT") {
			t.Errorf("tick_outcomes is not AUTOINCREMENT: %s", ddl)
		}
	}

	cs := character.NewStore(db)
	key := "k1"
	// Outcomes are written as a tick writes them, inside its transaction
	// (where SQLite runs a prepared statement), and as an idle tick with a
	// key does, alone.
	inTx := false
	add := func(o character.TickOutcome) error {
		inTx = !inTx
		if !inTx {
			return cs.AddOutcome(ctx, &o)
		}
		return db.Transaction(func(tx *gorm.DB) error {
			if err := cs.WithTx(tx).AddOutcome(ctx, &o); err != nil {
				return err
			}
			if o.ID == 0 {
				return errors.New("AddOutcome set no id")
			}
			return nil
		})
	}
	at := time.Now().UTC()
	for _, o := range []character.TickOutcome{
		{CharacterID: "brom", Tick: 1, Key: &key, At: at, Body: `{"tick":1}`},
		{CharacterID: "brom", Tick: 1, Idle: true, At: at, Body: `{"tick":1,"idle":true}`},
		{CharacterID: "mira", Tick: 1, Key: &key, At: at, Body: `{"tick":1}`},
		{CharacterID: "brom", Tick: 2, At: at, Body: `{"tick":2}`},
	} {
		if err := add(o); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // in a transaction and alone
		if err := add(character.TickOutcome{CharacterID: "brom", Tick: 3, Key: &key, At: at, Body: `{}`}); !errors.Is(err, character.ErrDuplicateKey) {
			t.Errorf("second outcome under brom's key (in a transaction: %v): %v, want ErrDuplicateKey", inTx, err)
		}
	}
	if o, err := cs.OutcomeByKey(ctx, "brom", "k1"); err != nil || o.Tick != 1 || o.CharacterID != "brom" {
		t.Errorf("OutcomeByKey = %+v, %v", o, err)
	}
	if o, err := cs.OutcomeByTick(ctx, "brom", 1); err != nil || o.Idle {
		t.Errorf("OutcomeByTick(1) = %+v, %v; want the committed, not the idle one", o, err)
	}
	if _, err := cs.OutcomeByTick(ctx, "brom", 9); !errors.Is(err, character.ErrNotFound) {
		t.Errorf("OutcomeByTick(9): %v, want ErrNotFound", err)
	}
	all, err := cs.Outcomes(ctx, character.FeedQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range all {
		got = append(got, o.CharacterID+":"+o.Body)
	}
	if want := `brom:{"tick":1} mira:{"tick":1} brom:{"tick":2}`; strings.Join(got, " ") != want {
		t.Errorf("Outcomes = %v, want %s (idle ones left out, in id order)", got, want)
	}
	after, err := cs.Outcomes(ctx, character.FeedQuery{After: all[0].ID, Limit: 10, NPCs: []string{"brom"}})
	if err != nil || len(after) != 1 || after[0].Tick != 2 {
		t.Errorf("Outcomes after %d of brom = %+v, %v; want brom's tick 2", all[0].ID, after, err)
	}
}

// PruneOutcomes deletes only outcomes older than the cutoff, oldest first
// and at most limit at a time; what is within retention stays findable by
// key, by tick and in the feed, and ids are never reused.
func TestPruneOutcomesRespectsRetention(t *testing.T) {
	ctx := context.Background()
	db := dbtest.Open(t)
	if err := store.Migrate(ctx, db, character.Migrations()); err != nil {
		t.Fatal(err)
	}
	cs := character.NewStore(db)
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	k := func(s string) *string { return &s }
	stored := []character.TickOutcome{
		{CharacterID: "brom", Tick: 1, Key: k("old"), At: now.Add(-10 * day), Body: `{"tick":1}`},
		{CharacterID: "mira", Tick: 1, Idle: true, Key: k("idle"), At: now.Add(-8 * day), Body: `{"tick":1,"idle":true}`},
		{CharacterID: "brom", Tick: 2, Key: k("recent"), At: now.Add(-6 * day), Body: `{"tick":2}`},
		{CharacterID: "mira", Tick: 2, At: now.Add(-time.Hour), Body: `{"tick":2}`},
	}
	for i := range stored {
		if err := cs.AddOutcome(ctx, &stored[i]); err != nil {
			t.Fatal(err)
		}
	}
	cutoff := now.Add(-7 * day)
	for i, want := range []int{1, 1, 0} {
		n, err := cs.PruneOutcomes(ctx, cutoff, 1)
		if err != nil || n != want {
			t.Fatalf("prune #%d = %d, %v; want %d", i+1, n, err, want)
		}
	}
	for _, key := range []string{"old", "idle"} {
		npc := map[string]string{"old": "brom", "idle": "mira"}[key]
		if _, err := cs.OutcomeByKey(ctx, npc, key); !errors.Is(err, character.ErrNotFound) {
			t.Errorf("key %q past retention: %v, want ErrNotFound", key, err)
		}
	}
	if o, err := cs.OutcomeByKey(ctx, "brom", "recent"); err != nil || o.Body != `{"tick":2}` {
		t.Errorf("key within retention = %+v, %v; want its stored answer", o, err)
	}
	if o, err := cs.OutcomeByTick(ctx, "mira", 2); err != nil || o.ID != stored[3].ID {
		t.Errorf("tick within retention = %+v, %v", o, err)
	}
	feed, err := cs.Outcomes(ctx, character.FeedQuery{After: 0, Limit: 10})
	if err != nil || len(feed) != 2 || feed[0].ID != stored[2].ID || feed[1].ID != stored[3].ID {
		t.Errorf("feed from the start after pruning = %+v, %v; want the two outcomes kept", feed, err)
	}
	// Everything pruned, the next outcome still gets a new id.
	if n, err := cs.PruneOutcomes(ctx, now.Add(day), 100); err != nil || n != 2 {
		t.Fatalf("prune all = %d, %v; want 2", n, err)
	}
	next := character.TickOutcome{CharacterID: "brom", Tick: 3, At: now, Body: `{"tick":3}`}
	if err := cs.AddOutcome(ctx, &next); err != nil {
		t.Fatal(err)
	}
	if next.ID <= stored[3].ID {
		t.Errorf("outcome after pruning got id %d, want above %d (ids are never reused)", next.ID, stored[3].ID)
	}
}
