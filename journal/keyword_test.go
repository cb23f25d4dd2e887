package journal

import (
	"context"
	"testing"

	"github.com/npcd/npcd/store"
)

// Store.Search behaves alike on both dialects: words match across their
// inflections, the better match ranks first, another NPC's rows are never
// found, and each result cites its source.
func TestStoreSearchStemsRanksAndKeepsToItsNPC(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "brom", t0)
	e.npc(t, "mira", t0)
	texts := []string{
		"Alice sharpened her swords at the forge, swords and more swords.",
		"The bakery sells bread.",
		"A sword hangs over the inn's door.",
	}
	e.say(t, "brom", t0, texts, nil)
	e.say(t, "mira", t0, []string{"Mira keeps a sword too."}, nil)
	ctx := context.Background()
	rs, err := e.jour.Search(ctx, "brom", "sword", 5)
	if err != nil {
		t.Fatal(err)
	}
	got := contents(rs)
	if len(got) != 2 || got[0] != texts[0] || got[1] != texts[2] {
		t.Fatalf("search for sword: %q; want the many-swords line, then the inn's", got)
	}
	for _, r := range rs {
		if r.Kind != KindMessage || len(r.Sources.MessageIDs) == 0 || r.Score <= 0 {
			t.Errorf("result %+v: want a scored message citing itself", r)
		}
	}
	if !store.IsSQLite(e.db) {
		// The keyword query is served by the GIN indexes.
		var n int64
		if err := e.db.Raw(`SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname LIKE '%_tsv'`).Scan(&n).Error; err != nil || n != 3 {
			t.Errorf("full-text indexes: %d, %v; want 3", n, err)
		}
	}
}
