package journal

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// A search answers the same every time: lines that tie (the same words,
// said on several days, with neighbours) come back in one order, with the
// same scores, whatever order the index's maps happen to yield them in.
func TestSearchIsDeterministic(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "npc", t0)
	for d := range 4 {
		var texts, refs []string
		for i := range 6 {
			texts = append(texts, fmt.Sprintf("Tobin says: the lantern by the mill is lit, bell %d.", d*6+i), fmt.Sprintf("Mara says: noted, day %d.", d))
			refs = append(refs, fmt.Sprintf("d%d-l%d", d, i), fmt.Sprintf("d%d-r%d", d, i))
		}
		e.say(t, "npc", t0.Add(-time.Duration(d)*24*time.Hour), texts, refs)
	}
	ctx := context.Background()
	answer := func(opts ...Option) []string {
		t.Helper()
		// A new retriever builds its index anew, with maps of its own.
		rs, err := e.retriever(t, opts...).Search(ctx, "npc", "the lantern by the mill", 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%v %.9f", r.Sources.EventRefs, r.Score))
		}
		return out
	}
	// Every signal, and the keyword and session signals alone (no
	// recency to tell the days apart: the session's best matches are
	// picked among equal lines).
	for _, opts := range [][]Option{nil, plain(WithWeights(0, 1), WithNeighbours(0.3))} {
		first := answer(opts...)
		if len(first) != 10 {
			t.Fatalf("%d results, want 10", len(first))
		}
		for range 20 {
			if got := answer(opts...); !slices.Equal(got, first) {
				t.Fatalf("the same search answered\n%v\nthen\n%v", first, got)
			}
		}
	}
}
