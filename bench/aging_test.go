package bench

import (
	"math"
	"testing"
)

// The rounds are summed up by tenths of the run, each tenth's CPU over its
// ticks, whatever the number of rounds; fewer than ten rounds give none.
func TestAgingOf(t *testing.T) {
	if a := agingOf(make([]TickRound, 9)); a != nil {
		t.Fatalf("9 rounds: %+v, want none", a)
	}
	// 25 rounds of 4 ticks: tenth t holds rounds [t*25/10, (t+1)*25/10),
	// two or three of them; round i (from 0) costs i+1 ms a tick, but the
	// rounds of the last tenth hold 2 ticks each for the same CPU, which
	// makes their tick twice as dear: (23+24+25)*4 ms over 6 ticks.
	rounds := make([]TickRound, 25)
	for i := range rounds {
		rounds[i] = TickRound{Round: i + 1, Ticks: 4, CPUMS: 4 * float64(i+1)}
	}
	for i := 22; i < 25; i++ {
		rounds[i].Ticks = 2
	}
	a := agingOf(rounds)
	if a == nil || len(a.CPUMSPerTick) != 10 {
		t.Fatalf("got %+v", a)
	}
	want := []float64{1.5, 4, 6.5, 9, 11.5, 14, 16.5, 19, 21.5, 48}
	for i, w := range want {
		if math.Abs(a.CPUMSPerTick[i]-w) > 1e-9 {
			t.Errorf("tenth %d: %.3f ms a tick, want %.3f (all %v)", i+1, a.CPUMSPerTick[i], w, a.CPUMSPerTick)
		}
	}
	if math.Abs(a.LastOverFirst-48/1.5) > 1e-9 || math.Abs(a.LastOverPrevious-48/21.5) > 1e-9 {
		t.Errorf("ratios %.4f and %.4f, want %.4f and %.4f", a.LastOverFirst, a.LastOverPrevious, 48/1.5, 48/21.5)
	}
}
