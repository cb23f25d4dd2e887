package journal

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
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
	// A window larger than the NPC's life changes nothing at all.
	q := "the amulet on the road"
	if full, wide := resultRefs(t, r, q, 5, SearchOptions{}), resultRefs(t, r, q, 5, SearchOptions{Window: 10000}); !slices.Equal(full, wide) {
		t.Fatalf("a window wider than the index changed the results: %v, without it %v", wide, full)
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
