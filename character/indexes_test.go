package character_test

import (
	"strings"
	"testing"

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
	if d := def("idx_messages_tool_call_id"); d != "" {
		t.Fatalf("messages are indexed by tool call id: %q", d)
	}
	for _, name := range []string{"idx_events_char_ref", "idx_outcomes_char_tick", "idx_messages_char_state_id"} {
		if d := def(name); d == "" || strings.Contains(d, "where") {
			t.Fatalf("index %s: %q, want a whole index", name, d)
		}
	}
}
