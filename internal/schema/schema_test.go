package schema

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/npcd/npcd/store"
)

// The list migrates a new database, and a second run changes nothing.
func TestMigrationsApplyInOrder(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "npcd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	for i := 0; i < 2; i++ {
		if err := store.Migrate(ctx, db, Migrations()); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
	// A tick writes no entry into an index that no query of its rows
	// reads: none of the NPCs' game times, and only partial ones of the
	// journal's types and cited messages.
	indexes := func(table string) map[string]bool {
		t.Helper()
		var list []struct {
			Name    string
			Partial bool
		}
		if err := db.Raw("SELECT name, partial FROM pragma_index_list(?)", table).Scan(&list).Error; err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, ix := range list {
			out[ix.Name] = ix.Partial
		}
		return out
	}
	chars, entries := indexes("characters"), indexes("entries")
	if _, ok := chars["idx_characters_game_time"]; ok {
		t.Errorf("characters keep an index of their game times: %v", chars)
	}
	for _, gone := range []string{"idx_journal_char_type", "idx_journal_char_source"} {
		if _, ok := entries[gone]; ok {
			t.Errorf("entries keep %s: %v", gone, entries)
		}
	}
	for _, partial := range []string{"idx_journal_rare_type", "idx_journal_notable_source", "idx_journal_pending"} {
		if p, ok := entries[partial]; !ok || !p {
			t.Errorf("entries: %s is missing or whole: %v", partial, entries)
		}
	}
	seen := map[string]int{}
	for _, m := range Migrations() {
		if m.Version != seen[m.Component]+1 {
			t.Errorf("%s migration %d follows %d", m.Component, m.Version, seen[m.Component])
		}
		seen[m.Component] = m.Version
	}
	for _, c := range []string{"character", "journal", "sleep"} {
		if seen[c] == 0 {
			t.Errorf("no migration of %s", c)
		}
	}
}

// Current accepts a database at this binary's schema and refuses an older
// one (it cannot be migrated read-only) and a newer one.
func TestCurrent(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "npcd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	all := Migrations()
	if err := store.Migrate(ctx, db, all[:len(all)-1]); err != nil {
		t.Fatal(err)
	}
	if err := Current(ctx, db); err == nil || !strings.Contains(err.Error(), "start the daemon on it once") {
		t.Fatalf("older schema: err %v, want a refusal saying how to upgrade", err)
	}
	if err := store.Migrate(ctx, db, all); err != nil {
		t.Fatal(err)
	}
	if err := Current(ctx, db); err != nil {
		t.Fatalf("current schema: %v", err)
	}
	last := all[len(all)-1]
	newer := store.Migration{Component: last.Component, Version: last.Version + 1, Name: "from the future", Up: func(*gorm.DB) error { return nil }}
	if err := store.Migrate(ctx, db, append(all, newer)); err != nil {
		t.Fatal(err)
	}
	if err := Current(ctx, db); !errors.Is(err, store.ErrSchemaNewer) {
		t.Fatalf("newer schema: err %v, want store.ErrSchemaNewer", err)
	}
}
