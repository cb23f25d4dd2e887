package store_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/npcd/npcd/store"
)

// TestTimeTextReadsAsTheDriver checks that a time column selected as
// +column and scanned with store.TimeText, NullTimeText or TimePtrText
// reads as the driver reads the column itself, for what npcd writes and
// for every other text the driver knows (older rows), and fails where it
// fails; and that what npcd writes is parsed by the first layout tried.
func TestTimeTextReadsAsTheDriver(t *testing.T) {
	db, _ := openFile(t)
	if err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, at DATETIME)").Error; err != nil {
		t.Fatal(err)
	}
	east := time.FixedZone("", 2*3600)
	written := []time.Time{
		time.Date(2026, 11, 26, 6, 46, 37, 123456789, time.UTC),
		time.Date(2026, 11, 26, 6, 46, 37, 0, time.UTC),
		time.Date(1999, 1, 2, 3, 4, 5, 600000000, east),
		time.Time{},
	}
	for _, at := range written {
		if err := db.Exec("INSERT INTO t (at) VALUES (?)", at).Error; err != nil {
			t.Fatal(err)
		}
	}
	var writtenIDs int64
	if err := db.Raw("SELECT max(id) FROM t").Scan(&writtenIDs).Error; err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	// Stored as they are: texts of other layouts, and other values.
	for _, v := range []any{
		"2026-11-26 06:46:37.5 +0000 UTC", "2026-11-26 06:46:37.5 +0000 UTC m=+0.001", "2026-11-26 08:46:37 +0200 EET",
		"2026-11-26T06:46:37.25+01:00", "2026-11-26 06:46:37", "2026-11-26T06:46:37.5", "2026-11-26 06:46:37Z",
		"2026-11-26 06:46", "2026-11-26T06:46", "2026-11-26", "2026-11-26Z", "not a time", "", int64(1700000000), 1.5,
		[]byte("2026-11-26 06:46:37"), nil,
	} {
		if _, err := sqlDB.Exec("INSERT INTO t (at) VALUES (?)", v); err != nil {
			t.Fatal(err)
		}
	}
	ids := func() []int64 {
		var ids []int64
		if err := db.Raw("SELECT id FROM t ORDER BY id").Scan(&ids).Error; err != nil {
			t.Fatal(err)
		}
		return ids
	}()
	for _, id := range ids {
		var raw any
		if err := sqlDB.QueryRow("SELECT +at FROM t WHERE id = ?", id).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if _, isTime := raw.(time.Time); isTime {
			t.Fatalf("row %d: +at was read as a time.Time: the driver parsed it", id)
		}
		if text, ok := raw.(string); ok && id <= writtenIDs {
			if _, err := time.Parse("2006-01-02 15:04:05.999999999-07:00", text); err != nil {
				t.Errorf("row %d: the time written as %q is not in the layout tried first: %v", id, text, err)
			}
		}

		var want time.Time
		wantTimeErr := sqlDB.QueryRow("SELECT at FROM t WHERE id = ?", id).Scan(&want)
		var got time.Time
		gotErr := sqlDB.QueryRow("SELECT +at FROM t WHERE id = ?", id).Scan(store.TimeText{T: &got})
		if (gotErr != nil) != (wantTimeErr != nil) || got.String() != want.String() || !got.Equal(want) {
			t.Errorf("row %d (%#v): TimeText read %v, %v; the driver %v, %v", id, raw, got, gotErr, want, wantTimeErr)
		}

		var wantNull sql.NullTime
		wantErr := sqlDB.QueryRow("SELECT at FROM t WHERE id = ?", id).Scan(&wantNull)
		var gotNull sql.NullTime
		gotErr = sqlDB.QueryRow("SELECT +at FROM t WHERE id = ?", id).Scan(store.NullTimeText{T: &gotNull})
		if (gotErr != nil) != (wantErr != nil) || (gotErr == nil && (gotNull.Valid != wantNull.Valid || gotNull.Time.String() != wantNull.Time.String())) {
			t.Errorf("row %d (%#v): NullTimeText read %v, %v; the driver %v, %v", id, raw, gotNull, gotErr, wantNull, wantErr)
		}

		var wantPtr, gotPtr *time.Time
		wantErr = sqlDB.QueryRow("SELECT at FROM t WHERE id = ?", id).Scan(&wantPtr)
		gotPtr = &time.Time{} // overwritten with nil for null
		gotErr = sqlDB.QueryRow("SELECT +at FROM t WHERE id = ?", id).Scan(store.TimePtrText{T: &gotPtr})
		if (gotErr != nil) != (wantErr != nil) || (gotErr == nil && (gotPtr == nil) != (wantPtr == nil)) ||
			(gotPtr != nil && wantPtr != nil && gotPtr.String() != wantPtr.String()) {
			t.Errorf("row %d (%#v): TimePtrText read %v, %v; the driver %v, %v", id, raw, gotPtr, gotErr, wantPtr, wantErr)
		}

		// A time the driver parsed (the column selected as it is) reads
		// as it is.
		var direct time.Time
		if err := sqlDB.QueryRow("SELECT at FROM t WHERE id = ?", id).Scan(store.TimeText{T: &direct}); (err != nil) != (wantTimeErr != nil) || direct.String() != want.String() {
			t.Errorf("row %d: TimeText of the parsed column read %v, %v; want %v, %v", id, direct, err, want, wantTimeErr)
		}
	}

	// A RETURNING clause's +column is read as text too.
	var raw any
	if err := sqlDB.QueryRow("UPDATE t SET at = at WHERE id = 1 RETURNING +at").Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw.(string); !ok {
		t.Errorf("RETURNING +at read a %T, want the text", raw)
	}
}

// TimesAsText marks the named columns of a select list, whole names only,
// leaves the rest of the statement alone, and refuses a column it cannot
// find once.
func TestTimesAsText(t *testing.T) {
	for _, c := range []struct {
		query string
		cols  []string
		want  string
	}{
		{"SELECT id, game_time, at FROM t WHERE game_time > ?", []string{"game_time"}, "SELECT id, +game_time, at FROM t WHERE game_time > ?"},
		{"SELECT a.game_time, b.game_time FROM a", []string{"a.game_time", "b.game_time"}, "SELECT +a.game_time, +b.game_time FROM a"},
		{"tick,game_time,last_game_time,at", []string{"game_time", "at"}, "tick,+game_time,last_game_time,+at"},
		{"SELECT created_at,\n\tupdated_at FROM t", []string{"created_at", "updated_at"}, "SELECT +created_at,\n\t+updated_at FROM t"},
		{"SELECT c.at, (SELECT x FROM y), e.at FROM c", []string{"c.at", "e.at"}, "SELECT +c.at, (SELECT x FROM y), +e.at FROM c"},
	} {
		if got := store.TimesAsText(c.query, c.cols...); got != c.want {
			t.Errorf("TimesAsText(%q, %v) = %q, want %q", c.query, c.cols, got, c.want)
		}
	}
	for _, bad := range [][]string{{"SELECT at FROM t", "game_time"}, {"SELECT at, at FROM t", "at"}, {"SELECT b.at FROM t", "at"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("TimesAsText(%q, %q) did not panic", bad[0], bad[1])
				}
			}()
			store.TimesAsText(bad[0], bad[1])
		}()
	}
}
