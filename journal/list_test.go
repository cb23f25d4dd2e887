package journal

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/dbtest"
	"github.com/npcd/npcd/store"
)

// List with CitingFrom returns the entries citing a message of that id or
// a newer one, however long ago or in whatever order they were written,
// as the whole list filtered would; with SourceMessages it keeps only
// those citing one of the messages. On SQLite it reads them through the
// index of the newest message each cites, not the whole journal.
func TestListCitingFrom(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	e.npc(t, "mara", t0)
	add := func(npc string, imp int, msgs ...int64) int64 {
		t.Helper()
		en := &Entry{Type: TypeObservation, Content: "seen", Importance: imp}
		en.Sources.V.MessageIDs = msgs
		if err := e.jour.Add(ctx, npc, en); err != nil {
			t.Fatal(err)
		}
		return en.ID
	}
	for i := int64(1); i <= 50; i++ { // an old life
		add("brom", 9, i)
	}
	add("mara", 9, 70) // another NPC
	cites70 := add("brom", 9, 60, 70)
	add("brom", 3, 71)          // not notable
	late := add("brom", 9, 72)  // cites 72
	old := add("brom", 9, 5, 8) // written late, cites old messages only
	none := add("brom", 9)      // cites no message
	ids := func(es []Entry) []int64 {
		var out []int64
		for _, en := range es {
			out = append(out, en.ID)
		}
		return out
	}
	got, err := e.jour.List(ctx, "brom", ListQuery{CitingFrom: 70})
	if err != nil {
		t.Fatal(err)
	}
	if g := ids(got); len(g) != 3 || g[0] != cites70 || g[2] != late {
		t.Fatalf("citing 70 or newer: entries %v, want the 3 citing 70, 71 and 72, oldest first", g)
	}
	for _, en := range got {
		if en.LatestSource < 70 {
			t.Errorf("entry %d: latest source %d", en.ID, en.LatestSource)
		}
	}
	got, err = e.jour.List(ctx, "brom", ListQuery{CitingFrom: 70, MinImportance: 8, SourceMessages: []int64{70, 71, 80}})
	if err != nil {
		t.Fatal(err)
	}
	if g := ids(got); len(g) != 1 || g[0] != cites70 {
		t.Fatalf("notable entries citing 70, 71 or 80: %v, want only %d", g, cites70)
	}
	// Without the bound, the same entry: the filter by SourceMessages
	// alone finds it too.
	got, err = e.jour.List(ctx, "brom", ListQuery{MinImportance: 8, SourceMessages: []int64{70, 71, 80}})
	if err != nil || len(got) != 1 {
		t.Fatalf("without CitingFrom: %d entries (%v), want 1", len(got), err)
	}
	// From 8 on, the entries citing 8 and 9, and the one written late
	// citing 5 and 8.
	got, err = e.jour.List(ctx, "brom", ListQuery{CitingFrom: 8, MinImportance: 8, SourceMessages: []int64{8, 9}})
	if err != nil {
		t.Fatal(err)
	}
	if g := ids(got); len(g) != 3 || g[2] != old {
		t.Fatalf("citing 8 or 9 from 8 on: %v, want the entries citing 8 and 9, then %d", g, old)
	}
	all, err := e.jour.List(ctx, "brom", ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range all {
		if en.ID == none && en.LatestSource != 0 {
			t.Errorf("an entry citing no message: latest source %d, want 0", en.LatestSource)
		}
	}
	if !store.IsSQLite(e.db) {
		return
	}
	stmt, args := listSQL("brom", ListQuery{CitingFrom: 70, MinImportance: 8}, true)
	var plan []struct{ Detail string }
	if err := e.db.Raw("EXPLAIN QUERY PLAN "+stmt, args...).Scan(&plan).Error; err != nil {
		t.Fatal(err)
	}
	if len(plan) == 0 || !strings.Contains(plan[0].Detail, "idx_journal_notable_source") {
		t.Errorf("%s: plan %+v, want the index of the newest message the notable entries cite", stmt, plan)
	}
}

// Migration 7 sets the newest message cited by each entry written before
// it (entries citing none, or with sources of another shape, keep 0, and
// one whose sources are not JSON fails nothing), so that a compaction
// after the upgrade still finds the entries citing its span.
func TestMigrationSetsTheNewestMessageCited(t *testing.T) {
	ctx := context.Background()
	db := dbtest.Open(t)
	js := Migrations()
	if js[6].Version != 7 {
		t.Fatalf("journal migration 7 is %d", js[6].Version)
	}
	if err := store.Migrate(ctx, db, append(character.Migrations(), js[:6]...)); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{db: db, chars: character.NewStore(db), jour: NewStore(db)}
	e.npc(t, "brom", t0)
	sources := []string{
		`{"journal_ids":null,"message_ids":[12,40,7],"event_refs":null}`,
		`{"journal_ids":[3],"message_ids":[],"event_refs":null}`,
		`{"journal_ids":[3],"message_ids":null,"event_refs":["e1"]}`,
		`null`,
		``,
		`{"message_ids":[41]}`,
		`{"message_ids":[43,`, // not JSON: left at 0, and the migration goes on
	}
	for _, src := range sources {
		if err := db.Exec("INSERT INTO entries (character_id, type, content, importance, game_time, created_at, sources, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
			"brom", TypeObservation, "seen", 9, t0, t0, src, "{}").Error; err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Migrate(ctx, db, append(character.Migrations(), js...)); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	var got []int64
	if err := db.Raw("SELECT latest_source FROM entries ORDER BY id").Scan(&got).Error; err != nil {
		t.Fatal(err)
	}
	if want := []int64{40, 0, 0, 0, 0, 41, 0}; !slices.Equal(got, want) {
		t.Fatalf("newest message cited by the old entries: %v, want %v", got, want)
	}
	var first int64
	if err := db.Raw("SELECT min(id) FROM entries").Scan(&first).Error; err != nil {
		t.Fatal(err)
	}
	es, err := e.jour.List(ctx, "brom", ListQuery{CitingFrom: 40, SourceMessages: []int64{40}})
	if err != nil || len(es) != 1 || es[0].ID != first {
		t.Fatalf("old entries citing 40, from 40 on: %+v (%v), want the first", es, err)
	}
}

// List reads the entries by hand, through a statement of the shape of its
// bounds: for every combination of them it returns what gorm's query of
// the same bounds returns, every field alike (times, the time an entry was
// consolidated or none, sources, metadata, the newest message cited). A
// list of a rarer type reads through the index of those types alone, and
// one of a common type through the NPC's entries by id.
func TestListAsGorm(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	e.npc(t, "mara", t0)
	types := []string{TypeObservation, TypeConversation, TypeReflection}
	var ids []int64
	for i := range 24 {
		en := &Entry{Type: types[i%3], Content: "entry " + strings.Repeat("x", i), Importance: 1 + i%10,
			GameTime: t0.Add(time.Duration(i) * time.Minute)}
		en.Sources.V.MessageIDs = []int64{int64(10 + i), int64(3 * i)}
		if i%4 == 0 {
			en.Metadata.V = map[string]any{"n": float64(i), "why": "because"}
		}
		npc := "brom"
		if i%7 == 6 {
			npc = "mara"
		}
		if err := e.jour.Add(ctx, npc, en); err != nil {
			t.Fatal(err)
		}
		if npc == "brom" {
			ids = append(ids, en.ID)
		}
	}
	if err := e.jour.MarkConsolidated(ctx, "brom", ids[:5], t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	gormList := func(lq ListQuery) []Entry {
		q := e.db.Where("character_id = ?", "brom")
		if lq.Type != "" {
			q = q.Where("type = ?", lq.Type)
		}
		if lq.Before > 0 {
			q = q.Where("id < ?", lq.Before)
		}
		if lq.MinImportance > 0 {
			q = q.Where("importance >= ?", lq.MinImportance)
		}
		if lq.CitingFrom > 0 {
			q = q.Where("latest_source >= ?", lq.CitingFrom)
		}
		if lq.Limit > 0 {
			q = q.Order("id DESC").Limit(lq.Limit)
		} else {
			q = q.Order("id")
		}
		var es []Entry
		if err := q.Find(&es).Error; err != nil {
			t.Fatal(err)
		}
		if lq.Limit > 0 {
			slices.Reverse(es)
		}
		return es
	}
	for shape := range 128 {
		if shape&32 != 0 && shape&1 == 0 || shape&64 != 0 && shape&4 == 0 {
			continue // a rarer type, a notable importance: variants of 1 and 4
		}
		var lq ListQuery
		if shape&1 != 0 {
			lq.Type = TypeConversation
			if shape&32 != 0 {
				lq.Type = TypeReflection // through the index of the rarer types
			}
		}
		if shape&2 != 0 {
			lq.Before = ids[len(ids)-3]
		}
		if shape&4 != 0 {
			lq.MinImportance = 4
			if shape&64 != 0 {
				lq.MinImportance = NotableImportance // with CitingFrom, through the index of the notable entries
			}
		}
		if shape&8 != 0 {
			lq.CitingFrom = 20
		}
		if shape&16 != 0 {
			lq.Limit = 4
		}
		got, err := e.jour.List(ctx, "brom", lq)
		if err != nil {
			t.Fatalf("%+v: %v", lq, err)
		}
		want := gormList(lq)
		if len(want) == 0 {
			t.Fatalf("%+v: gorm finds no entry; the test needs some", lq)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%+v: List against gorm (-want +got):\n%s", lq, d)
		}
	}
	if store.IsSQLite(e.db) {
		for typ, index := range map[string]string{TypeReflection: "idx_journal_rare_type", TypeConversation: "idx_journal_char_id"} {
			stmt, args := listSQL("brom", ListQuery{Type: typ, Limit: 4}, true)
			var plan []struct{ Detail string }
			if err := e.db.Raw("EXPLAIN QUERY PLAN "+stmt, args...).Scan(&plan).Error; err != nil {
				t.Fatal(err)
			}
			if len(plan) == 0 || !strings.Contains(plan[0].Detail, index) {
				t.Errorf("%s: plan %+v, want %s", stmt, plan, index)
			}
		}
	}
	all, err := e.jour.List(ctx, "brom", ListQuery{})
	if err != nil || len(all) != len(ids) || all[0].ConsolidatedAt == nil || all[5].ConsolidatedAt != nil || all[0].Metadata.V["why"] != "because" {
		t.Fatalf("all entries: %d (%v), want %d, the first five consolidated, metadata kept", len(all), err, len(ids))
	}
}
