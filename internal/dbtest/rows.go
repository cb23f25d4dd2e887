package dbtest

import (
	"testing"

	"gorm.io/gorm"
)

// Rows returns every column of the rows of table whose column key holds
// each of ids, in the order of ids, as the database stores them, without
// the columns named in omit (e.g. the key itself): what two ways of
// writing the same rows are compared by.
func Rows(tb testing.TB, db *gorm.DB, table, key string, ids []int64, omit ...string) []map[string]any {
	tb.Helper()
	out := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		var rows []map[string]any
		if err := db.Table(table).Where(key+" = ?", id).Find(&rows).Error; err != nil {
			tb.Fatal(err)
		}
		if len(rows) != 1 {
			tb.Fatalf("%s %s = %d: %d rows, want 1", table, key, id, len(rows))
		}
		for _, c := range omit {
			delete(rows[0], c)
		}
		out = append(out, rows[0])
	}
	return out
}
