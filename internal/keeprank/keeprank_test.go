package keeprank

import (
	"fmt"
	"testing"
)

// A rank is the same at every call, and the ranks of ids that differ only
// in a digit spread over the whole range: the lower half of the range
// holds about half of them.
func TestRanksAreFixedAndSpread(t *testing.T) {
	const n = 4000
	low := 0
	for i := range n {
		id := fmt.Sprintf("npc-%d", i)
		r := Of(id)
		if Of(id) != r {
			t.Fatalf("%s: two ranks", id)
		}
		if r < 1<<63 {
			low++
		}
	}
	if low < n*45/100 || low > n*55/100 {
		t.Fatalf("%d of %d ranks in the lower half of the range", low, n)
	}
}

// DropOrder puts all but the most recently used eighth first, by rank,
// then that eighth, least recently used first.
func TestDropOrder(t *testing.T) {
	var es []Entry
	for i := range 80 {
		es = append(es, Entry{ID: fmt.Sprintf("npc-%d", i), Used: int64(1000 - i*7)})
	}
	DropOrder(es)
	older, recent := es[:70], es[70:]
	for i := 1; i < len(older); i++ {
		if Of(older[i-1].ID) > Of(older[i].ID) {
			t.Fatalf("%s before %s: not in rank order", older[i-1].ID, older[i].ID)
		}
	}
	for i, e := range recent {
		// The ten used last (npc-9 … npc-0), least recent first.
		if want := fmt.Sprintf("npc-%d", 9-i); e.ID != want {
			t.Fatalf("recent eighth at %d: %s, want %s", i, e.ID, want)
		}
	}
	for _, e := range older {
		var n int
		if _, err := fmt.Sscanf(e.ID, "npc-%d", &n); err != nil || n < 10 {
			t.Fatalf("%s, one of the ten used last, is among the first dropped", e.ID)
		}
	}
}
