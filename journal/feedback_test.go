package journal

import (
	"context"
	"slices"
	"testing"
)

func TestFeedbackFindsWhatTheBestMatchesShare(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "npc", t0)
	e.say(t, "npc", t0, []string{
		"Mara says: I paint the sunset over the lake.",
		"Tobin says: the mill needs a new wheel.",
		"Mara says: we paint the sunset at dusk.",
		"Tobin says: bread is cheap at the market.",
		"Tobin says: that sunset took three evenings, all orange.",
	}, []string{"e1", "e2", "e3", "e4", "e5"})
	ctx := context.Background()
	refs := func(r *Retriever) []string {
		t.Helper()
		rs, err := r.Search(ctx, "npc", "what does Mara paint", 5)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, res := range rs {
			out = append(out, res.Sources.EventRefs...)
		}
		return out
	}
	// Keyword only, so only a shared word finds a line.
	if got := refs(e.retriever(t, plain(WithWeights(0, 1), WithFeedback(0))...)); slices.Contains(got, "e5") {
		t.Fatalf("without feedback the line about the sunset shares no word with the query: %v", got)
	}
	got := refs(e.retriever(t, plain(WithWeights(0, 1), WithFeedback(0.5))...))
	if i := slices.Index(got, "e5"); i < 2 {
		t.Fatalf("with feedback the sunset line must follow the two best matches: %v", got)
	}
	if slices.Contains(got, "e2") || slices.Contains(got, "e4") {
		t.Fatalf("feedback must not bring lines that share nothing with the best matches: %v", got)
	}
}

func TestFeedbackTerms(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "npc", t0)
	e.say(t, "npc", t0, []string{
		"Mara says: I paint the sunset over the lake.",
		"Mara says: we paint the sunset at dusk.",
		"Tobin says: that sunset took three evenings.",
	}, []string{"e1", "e2", "e3"})
	r := e.retriever(t)
	ctx := context.Background()
	x, err := r.acquire(ctx, "npc")
	if err != nil {
		t.Fatal(err)
	}
	defer r.release(x)
	var ranked []candidate
	for _, p := range x.users[:2] {
		ranked = append(ranked, candidate{p: p, kind: kindMessage, id: x.items[p].id, score: 1})
	}
	words, err := r.feedbackTerms(ctx, x, ranked, []string{"mara", "paint"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// "sunset" is in both lines and one more; "lake" and "dusk" are in
	// one line only; "mara" is a name and "paint" the query's own.
	if len(words) == 0 || words[0] != "sunset" {
		t.Fatalf("feedback words %v, want sunset first", words)
	}
	for _, w := range []string{"mara", "paint", "lake", "dusk"} {
		if slices.Contains(words, w) {
			t.Errorf("feedback words %v must not hold %q", words, w)
		}
	}
}

func TestAddHits(t *testing.T) {
	a := []kwHit{{kindMessage, 0, 1, 4}, {kindMessage, 1, 2, 2}}
	b := []kwHit{{kindMessage, 1, 2, 10}, {kindMessage, 2, 3, 5}}
	got := addHits(a, b, 0.5)
	want := map[int64]float64{1: 4, 2: 2 + 2, 3: 1}
	if len(got) != 3 {
		t.Fatalf("hits %v", got)
	}
	for _, h := range got {
		if h.p != int32(h.id-1) {
			t.Errorf("hit %d at position %d, want %d", h.id, h.p, h.id-1)
		}
		if h.score != want[h.id] {
			t.Errorf("hit %d scores %v, want %v", h.id, h.score, want[h.id])
		}
	}
	if got := addHits(a, b, 0); len(got) != 2 {
		t.Errorf("weight 0 adds nothing: %v", got)
	}
}

func TestWithFeedbackValidates(t *testing.T) {
	e := newEnv(t)
	for _, w := range []float64{-0.1, 1.5} {
		if _, err := NewRetriever(e.jour, WithFeedback(w)); err == nil {
			t.Errorf("WithFeedback(%v): want ErrBadOption", w)
		}
	}
}
