package journal

import (
	"context"
	"math"
	"testing"
)

func TestEntityRaisesWhatTheNamedSaid(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "npc", t0)
	e.say(t, "npc", t0, []string{
		"Mara says: Tobin, your goats and more goats in the lane.",
		"Mara says: the baker sells rye on market days.",
		"(rain falls on the square)",
		"Tobin says: my three goats graze by the old mill every morning.",
	}, []string{"e1", "e2", "e3", "e4"})
	ctx := context.Background()
	search := func(r *Retriever) []Result {
		t.Helper()
		rs, err := r.Search(ctx, "npc", "what goats does Tobin keep", 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 2 {
			t.Fatalf("%d results", len(rs))
		}
		return rs
	}
	if got := search(e.retriever(t, WithWindow(0, 1, 0), WithEntity(0)))[0].Sources.EventRefs[0]; got != "e1" {
		t.Fatalf("without the entity signal the line that repeats the words leads, got %s", got)
	}
	if got := search(e.retriever(t, WithWindow(0, 1, 0), WithEntity(1)))[0].Sources.EventRefs[0]; got != "e4" {
		t.Fatalf("what Tobin said must lead a question about Tobin, got %s", got)
	}
	// By default the gain is there, on Tobin's line only, and in the parts.
	for _, res := range search(e.retriever(t, WithWindow(0, 1, 0))) {
		gain, tobin := res.Parts[PartEntity], res.Sources.EventRefs[0] == "e4"
		if tobin != (gain > 0) || (tobin && math.Abs(gain-DefaultEntityWeight*(res.Parts[PartRelevance]-gain)) > 1e-9) {
			t.Fatalf("%q: entity part %v, relevance %v", res.Content, gain, res.Parts[PartRelevance])
		}
	}
}

func TestActorOf(t *testing.T) {
	for text, want := range map[string]string{
		"Bob says: \"hi\"":              "Bob",
		"Bob arrives":                   "Bob",
		"(the game tells you) you said": "",
		"(rain)":                        "",
		"Bob":                           "",
		"":                              "",
	} {
		if got := actorOf(text); got != want {
			t.Errorf("actorOf(%q) = %q, want %q", text, got, want)
		}
	}
	x := newIndex("n")
	bob := x.whoID("Bob Smith")
	if bob == 0 || x.whoID("bob") != bob || x.whoID("Mara") == bob || x.whoID("") != 0 || x.whoID("the") != 0 {
		t.Fatalf("entities are numbered by their first word: %v", x.who)
	}
	if named := x.named([]string{"what", "bob", "wants"}); len(named) != 1 || !named[bob] {
		t.Fatalf("named: %v", named)
	}
}

func TestWithEntityValidates(t *testing.T) {
	e := newEnv(t)
	for _, w := range []float64{-0.1, 4.5} {
		if _, err := NewRetriever(e.jour, WithEntity(w)); err == nil {
			t.Errorf("WithEntity(%v): want ErrBadOption", w)
		}
	}
}
