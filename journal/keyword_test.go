package journal

import (
	"context"
	"fmt"
	"testing"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/llm"
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
}

// Store.Search ranks by BM25 with the statistics of the NPC's own rows: a
// term rare among its rows outweighs one it says often, however often other
// NPCs say either, and no other NPC's row is ever a result.
func TestStoreSearchRanksByTheNPCsOwnBM25(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "brom", t0)
	e.npc(t, "mira", t0)
	ctx := context.Background()
	brom := e.say(t, "brom", t0, []string{
		"A sword hangs in the hall.",
		"The forge is cold tonight.",
		"Another sword lies by the door.",
		"The bakery sells bread.",
	}, nil)
	search := func() []Result {
		t.Helper()
		rs, err := e.jour.Search(ctx, "brom", "sword forge", 10)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	// Among Brom's rows forge (1 of 4) is rarer than sword (2 of 4): the
	// forge's line ranks first, at the normalized score 1.
	before := search()
	var got []int64
	for _, r := range before {
		got = append(got, r.ID)
	}
	if want := []int64{brom[1], brom[2], brom[0]}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("results %v (%q), want %v: the forge's line, then the swords' newest first", got, contents(before), want)
	}
	if before[0].Score != 1 || !(before[1].Score < 1) || before[1].Score != before[2].Score {
		t.Fatalf("scores %v %v %v: want 1 for the best, equal below for the two equal lines", before[0].Score, before[1].Score, before[2].Score)
	}
	// Mira speaks of forges a hundred times: across every NPC's rows the
	// forge would become the common word and the swords rank first.
	var lines []string
	for i := range 100 {
		lines = append(lines, fmt.Sprintf("Mira works the forge, day %d.", i))
	}
	mira := e.say(t, "mira", t0, lines, nil)
	if _, err := e.jour.AddMemory(ctx, "mira", &Memory{Content: "the forge and the sword", Entity: "brom"}); err != nil {
		t.Fatal(err)
	}
	after := search()
	if len(after) != len(before) {
		t.Fatalf("after Mira's rows: %d results (%q), want %d", len(after), contents(after), len(before))
	}
	for i := range after {
		if after[i].ID != before[i].ID || after[i].Kind != before[i].Kind || after[i].Score != before[i].Score {
			t.Fatalf("result %d changed with another NPC's rows: %+v, was %+v", i, after[i], before[i])
		}
	}
	// Mira finds only her own rows.
	rs, err := e.jour.Search(ctx, "mira", "sword", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Kind != KindMemory {
		t.Fatalf("Mira's search for sword: %+v, want her memory alone", rs)
	}
	owned := map[int64]bool{}
	for _, id := range mira {
		owned[id] = true
	}
	rs, err = e.jour.Search(ctx, "mira", "forge", MaxK)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Kind == KindMessage && !owned[r.ID] {
			t.Fatalf("Mira's search found message %d (%q), not hers", r.ID, r.Content)
		}
	}
}

// A memory is found by the words of its entity as by those of its content;
// messages of roles the Retriever does not search, and summaries, are not
// found.
func TestStoreSearchFindsMemoriesByEntity(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "brom", t0)
	ctx := context.Background()
	if _, err := e.jour.AddMemory(ctx, "brom", &Memory{Content: "keeps the harbor ledger", Entity: "Tomas", GameTime: t0}); err != nil {
		t.Fatal(err)
	}
	rs, err := e.jour.Search(ctx, "brom", "tomas", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Kind != KindMemory || rs[0].Content != "keeps the harbor ledger" {
		t.Fatalf("search for the entity: %+v", rs)
	}
	sys := []*character.Message{{Role: "system", Content: "The harbor ledger rules.", GameTime: t0}}
	if err := e.chars.AppendMessages(ctx, "brom", sys, llm.NewCounter(""), 0); err != nil {
		t.Fatal(err)
	}
	rs, err = e.jour.Search(ctx, "brom", "harbor ledger", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Kind != KindMemory {
		t.Fatalf("search for harbor ledger: %+v, want the memory alone", rs)
	}
}

// Migration 5 drops the full-text indexes migrations 3 and 4 made, with
// their triggers (SQLite) and text search configuration (PostgreSQL), and
// the rows they indexed stay searchable.
func TestMigrationDropsFullTextIndexes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	db := e.db
	// objects counts what migrations 3 and 4 made.
	objects := func() int64 {
		t.Helper()
		var n, cfg int64
		var err error
		if store.IsSQLite(db) {
			err = db.Raw(`SELECT count(*) FROM sqlite_master WHERE name LIKE '%\_fts%' ESCAPE '\'`).Scan(&n).Error
		} else {
			err = db.Raw(`SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname LIKE '%\_tsv'`).Scan(&n).Error
			if err == nil {
				err = db.Raw(`SELECT count(*) FROM pg_ts_config WHERE cfgname = 'npcd_search' AND cfgnamespace = current_schema()::regnamespace`).Scan(&cfg).Error
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		return n + cfg
	}
	if n := objects(); n != 0 {
		t.Fatalf("a new database holds %d full-text objects, want none", n)
	}
	// An old database: migrated up to version 4, with rows indexed.
	old := dbtest.Open(t)
	db = old
	all := append(character.Migrations(), Migrations()...)
	var upTo4 []store.Migration
	for _, m := range all {
		if m.Component != "journal" || m.Version < 5 {
			upTo4 = append(upTo4, m)
		}
	}
	if err := store.Migrate(ctx, old, upTo4); err != nil {
		t.Fatal(err)
	}
	o := &testEnv{db: old, chars: character.NewStore(old), jour: NewStore(old)}
	o.npc(t, "brom", t0)
	o.say(t, "brom", t0, []string{"Alice hid the key under the well."}, nil)
	if err := o.jour.Add(ctx, "brom", &Entry{Type: TypeNote, Content: "The well key opens the chapel.", Importance: 6}); err != nil {
		t.Fatal(err)
	}
	// SQLite: 3 FTS5 tables, their shadow tables and 9 triggers;
	// PostgreSQL: 3 GIN indexes and the configuration.
	if n := objects(); (store.IsSQLite(old) && n < 12) || (!store.IsSQLite(old) && n != 4) {
		t.Fatalf("before the upgrade: %d full-text objects", n)
	}
	if err := store.Migrate(ctx, old, all); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	if n := objects(); n != 0 {
		t.Fatalf("after the upgrade: %d full-text objects left", n)
	}
	o.say(t, "brom", t0, []string{"The key is gone from the well."}, nil)
	if err := o.jour.Add(ctx, "brom", &Entry{Type: TypeNote, Content: "Nobody knows where the key went.", Importance: 6}); err != nil {
		t.Fatal(err)
	}
	rs, err := o.jour.Search(ctx, "brom", "key", 10)
	if err != nil || len(rs) != 4 {
		t.Fatalf("search after the upgrade: %q, %v; want the 4 rows", contents(rs), err)
	}
}
