package store

import "testing"

func TestWritesTellsWritesFromReads(t *testing.T) {
	for q, want := range map[string]bool{
		"SELECT 1":                              false,
		"  select * from x":                     false,
		"/* c */ -- line\n SELECT 1":            false,
		"(SELECT 1)":                            false,
		"WITH a AS (SELECT 1) SELECT * FROM a":  false,
		"PRAGMA busy_timeout":                   false,
		"PRAGMA busy_timeout = 100":             false,
		"EXPLAIN QUERY PLAN SELECT 1":           false,
		"PRAGMA wal_checkpoint(TRUNCATE)":       true,
		"INSERT INTO x VALUES (1)":              true,
		"insert into x values (1) returning id": true,
		"UPDATE x SET a = 1":                    true,
		"DELETE FROM x":                         true,
		"REPLACE INTO x VALUES (1)":             true,
		"CREATE TABLE x (a)":                    true,
		"WITH a AS (SELECT 1) DELETE FROM x":    true,
		"-- only a comment":                     true,
		"VACUUM":                                true,
		"/* unterminated":                       true,
	} {
		if got := writes(q); got != want {
			t.Errorf("writes(%q) = %v, want %v", q, got, want)
		}
	}
}
