package journal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/store"
)

// TestAddStoresAsGorm checks that entries added inside a transaction
// (where SQLite runs a prepared statement, up to MaxPreparedRows entries
// at once) are stored as gorm stores them alone and inside a transaction
// — the same columns holding the same values.
func TestAddStoresAsGorm(t *testing.T) {
	ctx := context.Background()
	env := newEnv(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	for _, id := range []string{"alone", "prepared", "plain"} {
		env.npc(t, id, at)
	}
	batch := func(n int) []*Entry {
		es := make([]*Entry, n)
		for i := range n {
			e := &Entry{Type: TypeObservation, Content: fmt.Sprintf("saw the lantern%d yesterday", i), Importance: 12,
				CreatedAt: at.Add(time.Minute)}
			switch i % 3 {
			case 1:
				e.Type, e.Importance, e.GameTime = TypeNote, -3, at.Add(-time.Hour)
				e.Sources = store.NewJSON(character.Sources{MessageIDs: []int64{3, 4}, EventRefs: []string{"r1"}})
				e.Metadata = store.NewJSON(map[string]any{"tool": "note", "n": 1.5})
			case 2:
				cons := at.Add(time.Hour)
				e.ConsolidatedAt = &cons
			}
			es[i] = e
		}
		return es
	}
	write := func(who string, n int) []int64 {
		t.Helper()
		es := batch(n)
		var err error
		if who == "alone" {
			err = env.jour.Add(ctx, who, es...)
		} else {
			js := env.jour
			if who == "plain" {
				c := *js
				c.prep = nil
				js = &c
			}
			err = env.db.Transaction(func(tx *gorm.DB) error { return js.WithTx(tx).Add(ctx, who, es...) })
		}
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		ids := make([]int64, n)
		for i, e := range es {
			if e.ID <= 0 || (i > 0 && e.ID <= ids[i-1]) {
				t.Fatalf("%s: entry %d got id %d after %v", who, i, e.ID, ids[:i])
			}
			ids[i] = e.ID
		}
		return ids
	}
	for _, n := range []int{1, 3, character.MaxPreparedRows, character.MaxPreparedRows + 1} {
		want := dbtest.Rows(t, env.db, "entries", "id", write("alone", n), "id", "character_id")
		for _, who := range []string{"prepared", "plain"} {
			got := dbtest.Rows(t, env.db, "entries", "id", write(who, n), "id", "character_id")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%d entries: %s rows differ from gorm's (-gorm +%s):\n%s", n, who, who, diff)
			}
		}
	}
	if store.IsSQLite(env.db) {
		if env.jour.prep.Len() == 0 {
			t.Error("no statement was prepared inside an SQLite transaction")
		}
	}
}
