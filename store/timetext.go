package store

import (
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// SQLite stores a time as text, and the driver turns the text of a column
// declared DATETIME into a time.Time as it reads the row. It tries first
// the layout of time.Time.String, which fails for the layout npcd writes
// (_time_format=sqlite, see sqliteDSN) and allocates the error of the
// failed parse, on every such column of every row. The hot reads select
// their time columns as +column instead (unary plus returns the value as
// it is stored, but the result has no declared type, so the driver hands
// it over as text) and scan it with TimeText, NullTimeText or
// TimePtrText, which try npcd's layout first and else parse the text
// exactly as the driver does; the same destinations take the time.Time a
// driver gives for a column selected as it is (PostgreSQL, or a statement
// that does not select +column).

// sqliteWriteLayout is the layout the driver writes times in under
// _time_format=sqlite.
const sqliteWriteLayout = "2006-01-02 15:04:05.999999999-07:00"

// sqliteStringLayout is time.Time.String's layout, which the driver tries
// first (times written without _time_format).
const sqliteStringLayout = "2006-01-02 15:04:05.999999999 -0700 MST"

// sqliteReadLayouts are the layouts the driver tries next, in its order.
var sqliteReadLayouts = []string{
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02T15:04",
	"2006-01-02",
}

// ParseSQLiteTime parses s, the text of an SQLite time column, as the
// driver reads a column declared DATETIME (on a connection without a _loc
// parameter): ok is false when the driver would hand over s itself. The
// layout npcd writes is tried first; as a text in it matches no other
// layout the driver tries, the result is the same.
func ParseSQLiteTime(s string) (t time.Time, ok bool) {
	if t, err := time.Parse(sqliteWriteLayout, s); err == nil {
		return t, true
	}
	// The driver's order: time.Time.String's layout (without its
	// monotonic clock reading), then its list on the text without a
	// trailing Z.
	ts := s
	if x := strings.Index(ts, "m="); x > 0 {
		ts = ts[:x]
	}
	if t, err := time.Parse(sqliteStringLayout, strings.TrimSpace(ts)); err == nil {
		return t, true
	}
	ts = strings.TrimSuffix(s, "Z")
	for _, layout := range sqliteReadLayouts {
		if t, err := time.Parse(layout, ts); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// timeOf is value, a driver's value of a time column, as a time: a text
// parsed as ParseSQLiteTime does, a time.Time as it is.
func timeOf(value any) (time.Time, error) {
	switch v := value.(type) {
	case time.Time:
		return v, nil
	case string:
		if t, ok := ParseSQLiteTime(v); ok {
			return t, nil
		}
		return time.Time{}, fmt.Errorf("store: %q is not a time", v)
	}
	// The driver does not parse a blob, nor (without _inttotime) an
	// integer, and they do not scan into a time.Time.
	return time.Time{}, fmt.Errorf("store: a %T is not a time", value)
}

// TimeText is a Scan destination for a time column, not null, read into *T.
type TimeText struct{ T *time.Time }

// Scan implements sql.Scanner.
func (d TimeText) Scan(value any) error {
	if value == nil {
		return fmt.Errorf("store: converting NULL to time.Time is unsupported")
	}
	t, err := timeOf(value)
	if err != nil {
		return err
	}
	*d.T = t
	return nil
}

// NullTimeText is a Scan destination for a time column that may be null,
// read into *T.
type NullTimeText struct{ T *sql.NullTime }

// Scan implements sql.Scanner.
func (d NullTimeText) Scan(value any) error {
	if value == nil {
		*d.T = sql.NullTime{}
		return nil
	}
	t, err := timeOf(value)
	if err != nil {
		return err
	}
	*d.T = sql.NullTime{Time: t, Valid: true}
	return nil
}

// TimePtrText is a Scan destination for a time column that may be null,
// read into *T: nil for null, else a new time.
type TimePtrText struct{ T **time.Time }

// Scan implements sql.Scanner.
func (d TimePtrText) Scan(value any) error {
	if value == nil {
		*d.T = nil
		return nil
	}
	t, err := timeOf(value)
	if err != nil {
		return err
	}
	*d.T = &t
	return nil
}
