package bench

import (
	"reflect"
	"testing"

	"github.com/npcd/npcd/tick"
)

// Each history is compared with the first within each sitting; the ratio
// reported is the median of the sittings' ratios, with their range.
func TestTickRatios(t *testing.T) {
	cpu := [][]float64{
		{1.0, 1.3, 2.0},
		{2.0, 2.2, 3.0}, // a busy sitting: both sides slower
		{1.0, 1.2, 0},   // nothing measured for the last history: left out of its ratio
		{0, 5, 5},       // nothing measured for the first history: left out
	}
	got := tickRatios(100, []int{1000, 100000, 200000}, cpu)
	want := []TickRatio{
		{Compare: "cpu_ms_per_tick", NPCs: 100, HistoryTokens: 100000, AgainstHistoryTokens: 1000, Sittings: 3, Median: 1.2, Min: 1.1, Max: 1.3},
		{Compare: "cpu_ms_per_tick", NPCs: 100, HistoryTokens: 200000, AgainstHistoryTokens: 1000, Sittings: 2, Median: 1.75, Min: 1.5, Max: 2.0},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		g := got[i]
		// Ratios are quotients of floats: compare them rounded.
		for _, f := range []*float64{&g.Median, &g.Min, &g.Max} {
			*f = float64(int(*f*1000+0.5)) / 1000
		}
		if !reflect.DeepEqual(g, want[i]) {
			t.Errorf("ratio %d: got %+v, want %+v", i, g, want[i])
		}
	}
	// Two sittings: the median is the mean of the middle two.
	if r := tickRatios(1, []int{0, 1}, [][]float64{{1, 1}, {1, 2}}); len(r) != 1 || r[0].Median != 1.5 {
		t.Fatalf("median of two sittings: %+v", r)
	}
	if r := tickRatios(1, []int{0}, [][]float64{{1}}); r != nil {
		t.Fatalf("one history has nothing to compare: %+v", r)
	}
}

func TestBesideSince(t *testing.T) {
	res := func(count int, own bool) *tick.Result {
		r := &tick.Result{Context: tick.Context{Compactions: count}}
		if own {
			r.Compaction = &tick.Compaction{}
		}
		return r
	}
	for _, tc := range []struct {
		last int
		res  *tick.Result
		want int
	}{
		{-1, res(3, false), 0}, // nothing seen before: nothing to tell
		{3, res(3, false), 0},
		{3, res(5, false), 2}, // two beside the ticks
		{3, res(5, true), 1},  // one beside, one this tick's own
		{3, res(4, true), 0},
	} {
		if got := besideSince(tc.last, tc.res); got != tc.want {
			t.Errorf("besideSince(%d, count %d, own %v) = %d, want %d", tc.last, tc.res.Context.Compactions, tc.res.Compaction != nil, got, tc.want)
		}
	}
}
