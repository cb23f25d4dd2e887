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
	// The world clock's query (the latest game time of all NPCs) is
	// served by an index.
	var plan []struct{ Detail string }
	if err := db.Raw("EXPLAIN QUERY PLAN SELECT game_time FROM characters ORDER BY game_time DESC LIMIT 1").Scan(&plan).Error; err != nil {
		t.Fatal(err)
	}
	if len(plan) == 0 || !strings.Contains(plan[0].Detail, "idx_characters_game_time") {
		t.Errorf("the world clock scans the characters: %+v", plan)
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
