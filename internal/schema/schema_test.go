package schema

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

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
