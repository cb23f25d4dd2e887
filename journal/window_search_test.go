package journal

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/npcd/npcd/llm"
)

// windowCorpus gives npc an old past that holds the facts, then a long
// recent chatter about the road, so the facts lie far outside a small
// search window and "road" is held by most items.
func windowCorpus(t *testing.T, e *testEnv) {
	t.Helper()
	e.npc(t, "npc", t0)
	var texts, refs []string
	facts := []string{
		"Mara says: my grandmother's amulet is hidden under the chapel altar.",
		"Tobin says: the smith Odran forges blades with blue steel from the east.",
		"Mara says: the amulet glows when the harvest moon rises.",
	}
	for i, f := range facts {
		texts = append(texts, f)
		refs = append(refs, fmt.Sprintf("fact%d", i))
	}
	for i := 0; i < 300; i++ {
		line := "traveler%d says: the road was long, day %d, and the road was dusty."
		if i < 100 {
			line = "traveler%d says: the road, the dusty road, day %d, the road."
		}
		texts = append(texts, fmt.Sprintf(line, i%7, i))
		refs = append(refs, fmt.Sprintf("road%d", i))
	}
	e.say(t, "npc", t0, texts, refs)
}

func resultRefs(t *testing.T, r *Retriever, query string, k int, o SearchOptions) []string {
	t.Helper()
	var out []string
	for _, res := range search(t, r, query, k, o) {
		out = append(out, res.Sources.EventRefs...)
	}
	return out
}

func search(t *testing.T, r *Retriever, query string, k int, o SearchOptions) []Result {
	t.Helper()
	rs, err := r.SearchWith(context.Background(), "npc", query, k, o)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// A window far smaller than the NPC's life must not change the top results
// when the query's telling words are rare: the old facts are found by
// keyword, and ranked on the same vector and semantic scores as without a
// window.
func TestSearchWindowKeepsTopResults(t *testing.T) {
	e := newEnv(t)
	windowCorpus(t, e)
	r := e.retriever(t)
	for _, q := range []string{
		"where is the amulet hidden?",
		"who forges blades of blue steel",
		"is the amulet under the altar on the long dusty road?",
	} {
		full := resultRefs(t, r, q, 3, SearchOptions{NoFeedback: true})
		bounded := resultRefs(t, r, q, 3, SearchOptions{NoFeedback: true, Window: 32})
		if len(full) == 0 || !slices.ContainsFunc(full, func(s string) bool { return s[:4] == "fact" }) {
			t.Fatalf("%q: the unbounded search must find a fact: %v", q, full)
		}
		if !slices.Equal(full[:2], bounded[:2]) {
			t.Fatalf("%q: a window changed the top results: %v, without it %v", q, bounded, full)
		}
	}
	// Without a frequent term in the query, an old fact scores exactly
	// what it scores without a window.
	for _, q := range []string{"where is the amulet hidden?", "who forges blades of blue steel"} {
		full := search(t, r, q, 2, SearchOptions{NoFeedback: true})
		bounded := search(t, r, q, 2, SearchOptions{NoFeedback: true, Window: 32})
		if len(full) != len(bounded) {
			t.Fatalf("%q: %d results with a window, %d without", q, len(bounded), len(full))
		}
		for i := range full {
			if full[i].ID != bounded[i].ID || full[i].Score != bounded[i].Score || full[0].Parts[PartVector] == 0 {
				t.Fatalf("%q: result %d is %d (%v, parts %v) with a window, %d (%v, parts %v) without", q, i,
					bounded[i].ID, bounded[i].Score, bounded[i].Parts, full[i].ID, full[i].Score, full[i].Parts)
			}
		}
	}
	// A window larger than the NPC's life scans every item, and takes the
	// pool of a bounded search: the results it gives are the unbounded
	// search's best, in order; it may leave out the weakest lines only
	// the hundred candidates of the unbounded pool bring.
	q := "the amulet on the road"
	full, wide := resultRefs(t, r, q, 5, SearchOptions{}), resultRefs(t, r, q, 5, SearchOptions{Window: 10000})
	if !slices.Contains(wide, "fact0") || len(wide) > len(full) || !slices.Equal(full[:len(wide)], wide) {
		t.Fatalf("a window wider than the index changed the best results: %v, without it %v", wide, full)
	}
}

// The window bounds the postings read for a frequent term: with a window
// of 32, the road lines the search finds are among the 32 most recent.
func TestSearchWindowReadsRecentPostings(t *testing.T) {
	e := newEnv(t)
	windowCorpus(t, e)
	r := e.retriever(t)
	old := func(refs []string) bool {
		return slices.ContainsFunc(refs, func(ref string) bool {
			var i int
			_, err := fmt.Sscanf(ref, "road%d", &i)
			return err == nil && i < 100
		})
	}
	if full := resultRefs(t, r, "dusty road", 10, SearchOptions{NoFeedback: true}); !old(full) {
		t.Fatalf("without a window the old lines, which say road most, must rank: %v", full)
	}
	got := resultRefs(t, r, "dusty road", 10, SearchOptions{NoFeedback: true, Window: 32})
	if len(got) == 0 {
		t.Fatal("no result for a term every recent line holds")
	}
	for _, ref := range got {
		var i int
		if _, err := fmt.Sscanf(ref, "road%d", &i); err != nil || i < 300-32-2 {
			t.Fatalf("a bounded search read an old posting of a frequent term: %v", got)
		}
	}
	if _, err := r.SearchWith(context.Background(), "npc", "road", 3, SearchOptions{Window: -1}); !errors.Is(err, ErrBadOption) {
		t.Fatalf("a negative window: %v, want ErrBadOption", err)
	}
}

// NoParts changes nothing of a search but the parts it reports: same
// results, scores, contents and sources, in the same order, with Parts nil.
func TestSearchNoPartsKeepsResults(t *testing.T) {
	e := newEnv(t)
	windowCorpus(t, e)
	r := e.retriever(t)
	for _, q := range []string{"where is the amulet hidden?", "the dusty road", "who forges blades of blue steel on the road"} {
		for _, o := range []SearchOptions{{}, {NoFeedback: true, Window: 32}} {
			with := search(t, r, q, 5, o)
			o.NoParts = true
			without := search(t, r, q, 5, o)
			if len(with) == 0 || len(with) != len(without) {
				t.Fatalf("%q: %d results without parts, %d with", q, len(without), len(with))
			}
			for i := range with {
				if with[i].Parts == nil || without[i].Parts != nil {
					t.Fatalf("%q: result %d parts %v with, %v without", q, i, with[i].Parts, without[i].Parts)
				}
				w := with[i]
				w.Parts = nil
				if !reflect.DeepEqual(w, without[i]) {
					t.Fatalf("%q: result %d is %+v without parts, %+v with", q, i, without[i], w)
				}
			}
		}
	}
}

// A bounded search with the lexical embedder scans the vector channel for
// candidates of its own only when a query term other than a number is
// missing from the NPC's keyword index: a typo still finds its word by
// shared trigrams. With every
// term indexed, the keyword channel brings the candidates, and each is
// scored on the same vector cosine as after a full scan. With a model's
// embeddings the bounded search scans as the full one does.
func TestBoundedSearchVectorPool(t *testing.T) {
	texts := []string{
		"Alice lost her sword at the forge.",
		"The forge fire burns hot tonight.",
		"Bob sells fresh bread at the market.",
		"Swordz!",
	}
	find := func(rs []Result, ref string) *Result {
		for i := range rs {
			if slices.Contains(rs[i].Sources.EventRefs, ref) {
				return &rs[i]
			}
		}
		return nil
	}
	// Past the bound: four rows, a window of two. The rows the tests look
	// for are the first, older than the window (found by keyword and
	// scored by cosine), and the last, inside it. Within the bound (a
	// window of 100), the same: a young NPC's bounded search skips the
	// vector pool as an old one's does.
	windows := []int{2, 100}
	offline, err := llm.NewOfflineEmbedder(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts []Option
		// pooled is whether the bounded search of a known word still
		// finds the row sharing only its trigrams (a typo).
		pooled bool
	}{
		{"lexical", plain(), false},
		// fakeEmbedder stands for a model's endpoint: it has no weighted
		// vectors, so the retriever takes its vectors for meaning.
		{"model", plain(WithEmbedder(&fakeEmbedder{emb: offline}, "model-1")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.npc(t, "npc", t0)
			e.say(t, "npc", t0, texts, []string{"sword", "fire", "bread", "typo"})
			r := e.retriever(t, tc.opts...)
			full := search(t, r, "sword", 4, SearchOptions{NoFeedback: true})
			if find(full, "sword") == nil || find(full, "typo") == nil {
				t.Fatalf("the full search must find the sword by keyword and the typo by trigrams: %v", contents(full))
			}
			for _, w := range windows {
				bounded := SearchOptions{NoFeedback: true, Window: w}
				// A typo in the query is no indexed word: the bounded
				// search scans and finds the row that shares its trigrams.
				if typo := search(t, r, "swordy", 4, bounded); find(typo, "typo") == nil {
					t.Fatalf("window %d: a bounded search for a typo missed the row it resembles: %v", w, contents(typo))
				}
				// Right after the typo's scan, the known word: the sword's
				// vector part is its own cosine with "sword", not a score
				// left by the scan before. (Its final score may differ: the
				// session pass weighs the other candidates.)
				got := search(t, r, "sword", 4, bounded)
				want, have := find(full, "sword"), find(got, "sword")
				if have == nil || have.Parts[PartVector] != want.Parts[PartVector] || have.Parts[PartRelevance] != want.Parts[PartRelevance] || want.Parts[PartVector] <= 0 {
					t.Fatalf("window %d: bounded: %+v, full: %+v", w, have, want)
				}
				if pooled := find(got, "typo") != nil; pooled != tc.pooled {
					t.Fatalf("window %d: bounded search found the typo: %v, want %v (results %v)", w, pooled, tc.pooled, contents(got))
				}
				// A number the rows never hold is no typo of anything: the
				// lexical search does not scan for it; a word does.
				x, err := r.acquire(context.Background(), "npc")
				if err != nil {
					t.Fatal(err)
				}
				x.bound = w
				for q, want := range map[string]bool{"sword 4711": tc.pooled, "sword": tc.pooled, "swordy 4711": true} {
					if got := r.vectorPoolNeeded(x, Terms(q)); got != want {
						t.Errorf("window %d: %q scans the vector pool: %v, want %v", w, q, got, want)
					}
				}
				x.bound = 0
				r.release(x)
			}
		})
	}
}

// A bounded search takes boundedPool candidates per result from each
// channel, within its bound or past it: "road", held by every line, brings a hundred keyword
// candidates to an unbounded search and 4k to a bounded one.
func TestBoundedSearchPool(t *testing.T) {
	e := newEnv(t)
	windowCorpus(t, e)
	r := e.retriever(t)
	keywordCands := func(o SearchOptions) int {
		t.Helper()
		search(t, r, "road", 2, o)
		// The search gave its scratch back last.
		rs := r.scratch.get()
		defer r.scratch.put(rs)
		n := 0
		for _, c := range rs.sorted {
			if c.parts.keyword > 0 {
				n++
			}
		}
		return n
	}
	if n := keywordCands(SearchOptions{NoFeedback: true}); n != r.cfg.pool {
		t.Fatalf("an unbounded search ranked %d keyword candidates, want the pool of %d", n, r.cfg.pool)
	}
	if n := keywordCands(SearchOptions{NoFeedback: true, Window: 150}); n != boundedPool*2 {
		t.Fatalf("a bounded search ranked %d keyword candidates, want %d", n, boundedPool*2)
	}
	// Within its bound too: a young NPC's bounded search takes the pool
	// an old one's takes.
	if n := keywordCands(SearchOptions{NoFeedback: true, Window: 1000}); n != boundedPool*2 {
		t.Fatalf("a bounded search within its bound ranked %d keyword candidates, want %d", n, boundedPool*2)
	}
}

// number tells the terms written in ASCII digits only.
func TestNumber(t *testing.T) {
	for term, want := range map[string]bool{"4711": true, "0": true, "": false, "12a": false, "a12": false, "sword": false, "1.5": false, "١٢": false} {
		if got := number(term); got != want {
			t.Errorf("number(%q) = %v, want %v", term, got, want)
		}
	}
}
