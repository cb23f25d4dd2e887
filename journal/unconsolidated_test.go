package journal

import (
	"context"
	"strings"
	"testing"

	"github.com/npcd/npcd/store"
)

// The entries waiting for consolidation are found through an index of
// their own: neither consolidated entries nor context syntheses, which a
// long life piles up, are read to find them.
func TestUnconsolidatedReadsOnlyWaitingEntries(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	add := func(npc, typ, content string) *Entry {
		t.Helper()
		en := &Entry{Type: typ, Content: content, Importance: 5, GameTime: t0}
		if err := e.jour.Add(ctx, npc, en); err != nil {
			t.Fatal(err)
		}
		return en
	}
	done := add("brom", TypeNote, "consolidated already")
	add("brom", TypeContextSynthesis, "[CONTEXT SUMMARY] never consolidated")
	first := add("brom", TypeConversation, "alice says: hello")
	add("mira", TypeNote, "another NPC's")
	second := add("brom", TypeNote, "Alice owes me 5 gold.")
	if err := e.jour.MarkConsolidated(ctx, "brom", []int64{done.ID}, t0); err != nil {
		t.Fatal(err)
	}
	es, err := e.jour.Unconsolidated(ctx, "brom", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].ID != first.ID || es[1].ID != second.ID {
		t.Fatalf("unconsolidated %+v, want entries %d and %d, oldest first", es, first.ID, second.ID)
	}
	if es, _ := e.jour.Unconsolidated(ctx, "brom", 1); len(es) != 1 || es[0].ID != first.ID {
		t.Fatalf("unconsolidated, limit 1: %+v, want entry %d", es, first.ID)
	}
	if n, err := e.jour.CountUnconsolidated(ctx, "brom"); err != nil || n != 2 {
		t.Fatalf("count %d, %v; want 2", n, err)
	}
	q := "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?"
	if !store.IsSQLite(e.db) {
		q = "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = ?"
	}
	var def string
	if err := e.db.Raw(q, "idx_journal_pending").Scan(&def).Error; err != nil {
		t.Fatal(err)
	}
	if d := strings.ToLower(def); !strings.Contains(d, "where") || !strings.Contains(d, "consolidated_at is null") || !strings.Contains(d, TypeContextSynthesis) {
		t.Fatalf("index idx_journal_pending: %q, want a partial index of the entries waiting", def)
	}
	if !store.IsSQLite(e.db) {
		return
	}
	for _, stmt := range []string{
		"SELECT * FROM entries WHERE character_id = ? AND " + pendingWhere + " ORDER BY id LIMIT 10",
		"SELECT count(*) FROM entries WHERE character_id = ? AND " + pendingWhere,
	} {
		var plan []struct{ Detail string }
		if err := e.db.Raw("EXPLAIN QUERY PLAN "+stmt, "brom").Scan(&plan).Error; err != nil {
			t.Fatal(err)
		}
		if len(plan) == 0 || !strings.Contains(plan[0].Detail, "idx_journal_pending") || strings.Contains(plan[len(plan)-1].Detail, "TEMP B-TREE") {
			t.Errorf("%s: plan %+v, want the partial index, no sort", stmt, plan)
		}
	}
}
