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
