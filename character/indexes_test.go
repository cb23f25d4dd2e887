package character_test

import (
	"context"
	"strings"
	"testing"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
)

// The indexes a tick's rows would fill without any query reading them
// there hold only the rows looked up, and the ones that find an NPC's
// rows stay whole.
func TestPartialIndexes(t *testing.T) {
	db := newDB(t)
	def := func(name string) string {
		t.Helper()
		var sql string
		q := "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?"
		if !store.IsSQLite(db) {
			q = "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = ?"
		}
		if err := db.Raw(q, name).Scan(&sql).Error; err != nil {
			t.Fatal(err)
		}
		return strings.ToLower(sql)
	}
	for name, where := range map[string]string{
		"idx_messages_compaction_id": "compaction_id is not null",
		"idx_events_char_pending":    "consumed_at is null",
		"idx_outcomes_char_key":      "key is not null",
	} {
		if d := def(name); !strings.Contains(d, "where") || !strings.Contains(d, where) {
			t.Fatalf("index %s: %q, want a partial index where %s", name, d, where)
		}
	}
	for _, name := range []string{"idx_messages_tool_call_id", "idx_messages_char_mask"} {
		if d := def(name); d != "" {
			t.Fatalf("index %s is kept: %q", name, d)
		}
	}
	for _, name := range []string{"idx_events_char_ref", "idx_outcomes_char_tick", "idx_messages_char_state_id"} {
		if d := def(name); d == "" || strings.Contains(d, "where") {
			t.Fatalf("index %s: %q, want a whole index", name, d)
		}
	}
}

// A database made before the masking query lost its index drops it.
func TestMigrationDropsTheMaskingIndex(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	if err := db.Exec("CREATE INDEX idx_messages_char_mask ON messages (character_id, state, role, masked, turn)").Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("DELETE FROM schema_migrations WHERE component = 'character' AND version = 9").Error; err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, db, character.Migrations()); err != nil {
		t.Fatal(err)
	}
	var n int64
	q := "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'idx_messages_char_mask'"
	if !store.IsSQLite(db) {
		q = "SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'idx_messages_char_mask'"
	}
	if err := db.Raw(q).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("the masking index is still there after the migration")
	}
}
