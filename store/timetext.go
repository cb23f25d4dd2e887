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

// TimesAsText returns query with each of cols, in its select list, read
// as text: +column (see above). query is a SELECT, whose select list ends
// at its first FROM outside parentheses, or a bare column list (a
// RETURNING clause); each
// column must stand there once, as a whole name, or TimesAsText panics:
// it derives SQLite's form of a fixed statement once, at start-up.
func TimesAsText(query string, cols ...string) string {
	list, rest := query, ""
	depth := 0
	for i := 0; i < len(query); i++ {
		switch {
		case query[i] == '(':
			depth++
		case query[i] == ')':
			depth--
		case depth == 0 && strings.HasPrefix(query[i:], "FROM") && columnEdge(query, i-1):
			list, rest = query[:i], query[i:]
			i = len(query)
		}
	}
	for _, col := range cols {
		at := -1
		for i := 0; ; {
			j := strings.Index(list[i:], col)
			if j < 0 {
				break
			}
			j += i
			if columnEdge(list, j-1) && columnEdge(list, j+len(col)) {
				if at >= 0 {
					panic(fmt.Sprintf("store: %q appears twice in %q", col, list))
				}
				at = j
			}
			i = j + len(col)
		}
		if at < 0 {
			panic(fmt.Sprintf("store: no column %q in %q", col, list))
		}
		list = list[:at] + "+" + list[at:]
	}
	return list + rest
}

// columnEdge reports whether s[i] (or the end of s) can border a column
// name: not part of a name, a qualifier or a +.
func columnEdge(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return true
	}
	c := s[i]
	return !(c == '_' || c == '.' || c == '+' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9')
}
