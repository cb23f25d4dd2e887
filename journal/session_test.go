package journal

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestSessionRaisesWhatWasSaidOnTheDayOfTheBestMatches(t *testing.T) {
	e := newEnv(t)
	day1, day2 := t0.Add(-72*time.Hour), t0
	e.npc(t, "npc", t0)
	e.say(t, "npc", day1, []string{
		"Mara says: the harvest festival lanterns were lovely.",
		"Mara says: lanterns over the harvest festival square.",
		"Tobin says: the date suited us.",
	}, []string{"a1", "a2", "a3"})
	e.say(t, "npc", day2, []string{
		"Tobin says: the date moved again.",
		"Mara says: bread is cheap at the mill.",
	}, []string{"b1", "b2"})
	ctx := context.Background()
	// Keyword only, so the two lines naming the date score the same and
	// only the session tells them apart.
	order := func(r *Retriever) []string {
		t.Helper()
		rs, err := r.Search(ctx, "npc", "date of the harvest festival lanterns", 4)
		if err != nil {
			t.Fatal(err)
		}
		var refs []string
		for _, res := range rs {
			refs = append(refs, res.Sources.EventRefs[0])
		}
		return refs
	}
	if got := order(e.retriever(t, plain(WithWeights(0, 1), WithSession(0))...)); len(got) != 4 || got[2] != "b1" || got[3] != "a3" {
		t.Fatalf("without the session signal the newer of two equal matches leads: %v", got)
	}
	r := e.retriever(t, plain(WithWeights(0, 1), WithSession(1))...)
	if got := order(r); len(got) != 4 || got[2] != "a3" || got[3] != "b1" {
		t.Fatalf("the line of the day of the best matches must lead the other: %v", got)
	}
	rs, err := r.Search(ctx, "npc", "date of the harvest festival lanterns", 4)
	if err != nil {
		t.Fatal(err)
	}
	gain := map[string]float64{}
	for _, res := range rs {
		gain[res.Sources.EventRefs[0]] = res.Parts[PartSession]
	}
	// The two best matches are on a3's day, and b1 is one line of the
	// five best: a3 gains more than twice what b1 gains.
	if gain["a3"] <= 2*gain["b1"] || gain["a3"] >= 1 {
		t.Errorf("session gains %v", gain)
	}
}

func TestSessionKeepsTheOrderOfOneDay(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "npc", t0)
	e.say(t, "npc", t0, []string{
		"Mara says: the harvest festival lanterns were lovely.",
		"Tobin says: the date suited us.",
		"Mara says: lanterns over the square.",
		"Tobin says: the date moved again for the harvest.",
		"Mara says: bread is cheap at the mill.",
	}, []string{"a1", "a2", "a3", "a4", "a5"})
	ctx := context.Background()
	var orders [2][]string
	for i, w := range []float64{0, 1} {
		rs, err := e.retriever(t, plain(WithSession(w))...).Search(ctx, "npc", "date of the harvest festival lanterns", 5)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range rs {
			orders[i] = append(orders[i], res.Sources.EventRefs[0])
			if w > 0 && res.Parts[PartSession] != 1 {
				t.Errorf("%s: every line of the one day gains the whole weight, got %v", res.Sources.EventRefs[0], res.Parts[PartSession])
			}
		}
	}
	if len(orders[0]) < 4 || !slices.Equal(orders[0], orders[1]) {
		t.Fatalf("one day's lines must keep their order: %v, with the session signal %v", orders[0], orders[1])
	}
}

func TestGameDay(t *testing.T) {
	for ts, want := range map[int64]int64{0: 0, 86399: 0, 86400: 1, -1: -1, -86400: -1, -86401: -2} {
		if got := gameDay(ts); got != want {
			t.Errorf("gameDay(%d) = %d, want %d", ts, got, want)
		}
	}
}

func TestWithSessionValidates(t *testing.T) {
	e := newEnv(t)
	for _, w := range []float64{-0.1, 2.5} {
		if _, err := NewRetriever(e.jour, WithSession(w)); err == nil {
			t.Errorf("WithSession(%v): want ErrBadOption", w)
		}
	}
}
