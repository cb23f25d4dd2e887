package journal

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A memory that says the same thing in other words is found through the
// semantic channel, above an unrelated one, and not without it.
func TestSemanticRanksAParaphraseAboveUnrelated(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "brom", t0)
	ctx := context.Background()
	for _, c := range []string{
		"The blacksmith sold a rusty axe at the market.",
		"We took the children camping in the forest last summer.",
		"The mayor raised the grain tax again.",
	} {
		if _, err := e.jour.AddMemory(ctx, "brom", &Memory{Content: c, Importance: 5, GameTime: t0}); err != nil {
			t.Fatal(err)
		}
	}
	const query = "do the kids enjoy hiking outdoors?"
	rs, err := e.retriever(t).Search(ctx, "brom", query, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 || rs[0].Content != "We took the children camping in the forest last summer." {
		t.Fatalf("results %+v", rs)
	}
	if rs[0].Parts[PartSemantic] <= 0 || rs[0].Parts[PartKeyword] != 0 {
		t.Fatalf("parts %v: the match should be semantic only", rs[0].Parts)
	}
	for _, r := range rs[1:] {
		if r.Score >= rs[0].Score {
			t.Fatalf("%q scores %v, the paraphrase %v", r.Content, r.Score, rs[0].Score)
		}
	}
	off, err := e.retriever(t, WithSemantic(0)).Search(ctx, "brom", query, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range off {
		if r.Content == rs[0].Content && r.Score >= rs[0].Score {
			t.Fatalf("without the semantic channel the paraphrase still scores %v", r.Score)
		}
		if _, ok := r.Parts[PartSemantic]; ok {
			t.Fatalf("semantic part reported with the channel off: %v", r.Parts)
		}
	}
}

// The same rows and query give the same results and scores, from one
// retriever searching twice and from two retrievers.
func TestSemanticSearchIsDeterministic(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "brom", t0)
	e.say(t, "brom", t0, []string{
		"Alice says: my daughter adopted a puppy from the shelter",
		"Bob says: the harvest was poor, the wheat rotted in the rain",
		"Alice says: I started painting landscapes with watercolors",
		"Bob says: the river flooded the lower fields",
	}, []string{"e1", "e2", "e3", "e4"})
	ctx := context.Background()
	const query = "what pets and hobbies does Alice have"
	a, b := e.retriever(t), e.retriever(t)
	r1, err := a.Search(ctx, "brom", query, 4)
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := a.Search(ctx, "brom", query, 4)
	r3, _ := b.Search(ctx, "brom", query, 4)
	if len(r1) == 0 {
		t.Fatal("no results")
	}
	for _, other := range [][]Result{r2, r3} {
		if len(other) != len(r1) {
			t.Fatalf("%d results, then %d", len(r1), len(other))
		}
		for i := range r1 {
			if r1[i].ID != other[i].ID || r1[i].Score != other[i].Score || r1[i].Parts[PartSemantic] != other[i].Parts[PartSemantic] {
				t.Fatalf("result %d: %+v, then %+v", i, r1[i], other[i])
			}
		}
	}
}

func TestSemanticVectors(t *testing.T) {
	x := newIndex("n")
	r, err := NewRetriever(NewStore(nil))
	if err != nil {
		t.Fatal(err)
	}
	x.wv = r.words
	x.add(item{id: 1, kind: kindMessage}, "the kids went camping")
	x.add(item{id: 2, kind: kindMessage}, "the tax on grain went up")
	x.add(item{id: 3, kind: kindMessage}, "Zorblax qwvy!") // no known word
	if x.sem.len() != 0 || len(x.semText) != 3 {
		t.Fatalf("%d codes and %d texts waiting after adding: vectors are computed when a search needs them", x.sem.len(), len(x.semText))
	}
	x.ensureSemantic()
	if x.sem.len() != 3 || len(x.semScale) != 3 || len(x.semText) != 0 {
		t.Fatalf("%d codes, %d scales", x.sem.len(), len(x.semScale))
	}
	if x.semScale[2] != 0 {
		t.Fatal("a text without a known word has a vector")
	}
	x.scanSemantic(x.semQuery([]string{"children", "hiking"}))
	if s := x.semScores; !(s[0] > 0 && s[0] > s[1] && s[2] == 0) {
		t.Fatalf("scores %v", s)
	}
	if q, _ := x.semQuery([]string{"zorblax"}); q != nil {
		t.Fatal("a query without a known word has a vector")
	}
	x.scanSemantic(nil, 0)
	for _, s := range x.semScores {
		if s != 0 {
			t.Fatalf("scores %v without a query vector", x.semScores)
		}
	}
	if got := dot8([]int8{1, -2, 3, 4, 5}, []int8{5, 4, -3, 2, 1}); got != 5-8-9+8+5 {
		t.Fatalf("dot8 = %d", got)
	}
	// Every length, across the 16-element steps, against the plain sum.
	a, b := make([]int8, 40), make([]int8, 40)
	for i := range a {
		a[i], b[i] = int8(i*37-100), int8(127-i*11)
	}
	for n := 0; n <= len(a); n++ {
		var want int32
		for i := 0; i < n; i++ {
			want += int32(a[i]) * int32(b[i])
		}
		if got := dot8(a[:n], b[:n]); got != want {
			t.Fatalf("dot8 of %d = %d, want %d", n, got, want)
		}
	}
}

// An index built for something else than a semantic search (near
// duplicates, as a sleep's consolidation asks) computes no sentence
// vector; the first search that needs them computes them all, and ranks
// as an index that had them from the start.
func TestSentenceVectorsWaitForASearch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "brom", t0)
	e.say(t, "brom", t0, []string{"alice says: we took the children camping", "bob says: the tax on grain went up"}, nil)
	r := e.retriever(t)
	if _, err := r.NearDuplicates(ctx, "brom", "the kids went camping", 0.9, 5); err != nil {
		t.Fatal(err)
	}
	x := r.npcs["brom"]
	if x.sem.len() != 0 || len(x.semText) != 2 {
		t.Fatalf("after near duplicates: %d codes, %d texts waiting; want none computed", x.sem.len(), len(x.semText))
	}
	got, err := r.Search(ctx, "brom", "my kids love the outdoors", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(x.semText) != 0 || len(x.semScale) != 2 {
		t.Fatalf("after a search: %d scales, %d texts waiting; want all computed", len(x.semScale), len(x.semText))
	}
	want, err := e.retriever(t).Search(ctx, "brom", "my kids love the outdoors", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0].Parts[PartSemantic] == 0 {
		t.Fatalf("search = %+v, want the camping trip found by meaning", got)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("late vectors rank otherwise (-fresh +late):\n%s", diff)
	}
}
