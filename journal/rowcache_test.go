package journal

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"
)

// TestSearchReadsShownMessagesOnce checks that a search showing the
// messages an earlier search showed reads none of them again, and shows
// them alike; and that a deleted NPC's cached rows go with its index.
func TestSearchReadsShownMessagesOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	e.say(t, "brom", t0, []string{"alice says: my sword is lost", "bob says: the forge is cold", "alice says: the sword has a red hilt"}, nil)
	r := e.retriever(t)
	var reads atomic.Int64
	count := func(db *gorm.DB) {
		// SQLite quotes names with backquotes, PostgreSQL with double quotes.
		if sql := strings.ReplaceAll(db.Statement.SQL.String(), `"`, "`"); strings.Contains(sql, "FROM `messages` WHERE id IN") {
			reads.Add(1)
		}
	}
	if err := e.db.Callback().Query().After("gorm:query").Register("count_message_reads", count); err != nil {
		t.Fatal(err)
	}
	if err := e.db.Callback().Row().After("gorm:row").Register("count_message_reads", count); err != nil {
		t.Fatal(err)
	}
	first, err := r.Search(ctx, "brom", "sword", 5)
	if err != nil || len(first) == 0 {
		t.Fatalf("first search: %v, %v", first, err)
	}
	if reads.Load() == 0 {
		t.Fatal("the first search read no message rows; the test counts the wrong statement")
	}
	reads.Store(0)
	again, err := r.Search(ctx, "brom", "sword", 5)
	if err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("the second search read message rows %d times, want none", n)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("the second search shows otherwise (-first +second):\n%s", diff)
	}
	r.Forget("brom")
	reads.Store(0)
	if _, err := r.Search(ctx, "brom", "sword", 5); err != nil {
		t.Fatal(err)
	}
	if reads.Load() == 0 {
		t.Error("after Forget a search read no message rows: the cache outlived the index")
	}
}

// TestSearchShowsNewMessagesWithoutReadingThem checks that messages added
// since an NPC's index was built, as a tick adds them, are shown by the
// next search without reading their rows again (the refresh that indexed
// them kept them), and exactly as a search of a fresh index shows them.
func TestSearchShowsNewMessagesWithoutReadingThem(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	e.say(t, "brom", t0, []string{"bob says: the forge is cold"}, nil)
	r := e.retriever(t)
	if _, err := r.Search(ctx, "brom", "forge", 5); err != nil {
		t.Fatal(err)
	}
	e.say(t, "brom", t0, []string{"alice says: my sword is lost", "alice says: the sword has a red hilt"}, []string{"ev-1", "ev-2"})
	var reads atomic.Int64
	count := func(db *gorm.DB) {
		if sql := strings.ReplaceAll(db.Statement.SQL.String(), `"`, "`"); strings.Contains(sql, "FROM `messages` WHERE id IN") {
			reads.Add(1)
		}
	}
	if err := e.db.Callback().Query().After("gorm:query").Register("count_new_message_reads", count); err != nil {
		t.Fatal(err)
	}
	if err := e.db.Callback().Row().After("gorm:row").Register("count_new_message_reads", count); err != nil {
		t.Fatal(err)
	}
	got, err := r.Search(ctx, "brom", "sword", 5)
	if err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("the search read message rows %d times, want none: the refresh had them", n)
	}
	if len(got) == 0 || len(got[0].Sources.EventRefs) == 0 {
		t.Fatalf("search = %+v, want the new messages with their event refs", got)
	}
	cold, err := e.retriever(t).Search(ctx, "brom", "sword", 5)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cold, got); diff != "" {
		t.Errorf("the kept rows show otherwise than rows read (-read +kept):\n%s", diff)
	}
}

// TestSearchKeepsJournalEntries checks that journal entries a search
// showed, and those written since the index was built, are shown by the
// next search without reading them again, exactly as a fresh index shows
// them.
func TestSearchKeepsJournalEntries(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	add := func(content string) {
		t.Helper()
		en := &Entry{Type: TypeNote, Content: content, Importance: 7, GameTime: t0}
		en.Sources.V.EventRefs = []string{"ev-" + content[:4]}
		if err := e.jour.Add(ctx, "brom", en); err != nil {
			t.Fatal(err)
		}
	}
	add("Alice lost her sword at the forge.")
	r := e.retriever(t)
	if _, err := r.Search(ctx, "brom", "sword", 5); err != nil {
		t.Fatal(err)
	}
	add("Bob found a sword with a red hilt.")
	var reads atomic.Int64
	count := func(db *gorm.DB) {
		if sql := strings.ReplaceAll(db.Statement.SQL.String(), `"`, "`"); strings.Contains(sql, "FROM `entries` WHERE id IN") {
			reads.Add(1)
		}
	}
	if err := e.db.Callback().Query().After("gorm:query").Register("count_entry_reads", count); err != nil {
		t.Fatal(err)
	}
	got, err := r.Search(ctx, "brom", "sword", 5)
	if err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("the search read journal entries %d times, want none", n)
	}
	if len(got) != 2 || got[0].Kind != KindJournal || len(got[0].Sources.EventRefs) == 0 {
		t.Fatalf("search = %+v, want both entries with their sources", got)
	}
	cold, err := e.retriever(t).Search(ctx, "brom", "sword", 5)
	if err != nil {
		t.Fatal(err)
	}
	if reads.Load() == 0 {
		t.Error("a fresh index read no journal entries: the test counts the wrong statement")
	}
	if diff := cmp.Diff(cold, got); diff != "" {
		t.Errorf("kept entries show otherwise than entries read (-read +kept):\n%s", diff)
	}
}
