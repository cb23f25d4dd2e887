package character

import (
	"strconv"
	"testing"
)

// glanceEventsSQL gives each limit's text as built from its head, and
// builds it only once: a tick's glance allocates nothing for it.
func TestGlanceEventsSQLBuiltOnce(t *testing.T) {
	for _, limit := range []int{1, 5, 64} {
		want := glanceEventsHead + strconv.Itoa(limit+1)
		if got := glanceEventsSQL(limit); got != want {
			t.Fatalf("limit %d: %q, want %q", limit, got, want)
		}
		if got := glanceEventsSQL(limit); got != want {
			t.Fatalf("limit %d, again: %q, want %q", limit, got, want)
		}
		if n := testing.AllocsPerRun(100, func() { _ = glanceEventsSQL(limit) }); n != 0 {
			t.Fatalf("limit %d: %v allocations a call", limit, n)
		}
	}
}
