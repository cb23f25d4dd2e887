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
