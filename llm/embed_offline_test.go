package llm

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func cosine(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func TestOfflineEmbedderIsDeterministicAndNormalized(t *testing.T) {
	e1, _ := NewOfflineEmbedder(0)
	e2, _ := NewOfflineEmbedder(DefaultOfflineDims)
	texts := []string{"Alice lost her sword at the forge.", "", "the and of it", "Ünïcödé wörds 東京"}
	a, err := e1.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := e2.Embed(context.Background(), texts)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("two embedders disagree (-a +b):\n%s", diff)
	}
	wantNorm := []float64{1, 0, 0, 1} // stop words only embed to zero
	for i, v := range a {
		if len(v) != DefaultOfflineDims {
			t.Fatalf("%q: %d dims", texts[i], len(v))
		}
		if n := math.Sqrt(cosine(v, v)); math.Abs(n-wantNorm[i]) > 1e-6 {
			t.Errorf("%q: norm %v, want %v", texts[i], n, wantNorm[i])
		}
	}
	if e1.Model() != "npcd-offline-v1-256" {
		t.Fatalf("model %q", e1.Model())
	}
}

func TestOfflineEmbedderRanksSharedStemsAboveUnrelated(t *testing.T) {
	e, _ := NewOfflineEmbedder(0)
	tests := []struct {
		query, paraphrase, unrelated string
	}{
		{"Alice lost her sword at the forge", "the swords Alice was losing near a forge", "Bob sells warm bread at the market"},
		{"the dragon burned the mill", "dragons burning mills", "the weather is pleasant today"},
		{"Mira promised to repair the cart", "a repaired cart, as Mira had promised", "the river floods every spring"},
		{"swordsmith", "the swordsmiths guild", "a quiet library"},
		{"forgotten promises", "she forgot what she promised", "apples and pears"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			q, p, u := e.Vector(tc.query), e.Vector(tc.paraphrase), e.Vector(tc.unrelated)
			cp, cu := cosine(q, p), cosine(q, u)
			if cp <= cu || cp < 0.2 {
				t.Fatalf("paraphrase %.3f, unrelated %.3f", cp, cu)
			}
		})
	}
}

func TestOfflineEmbedderKnowsNoSynonyms(t *testing.T) {
	e, _ := NewOfflineEmbedder(0)
	if c := cosine(e.Vector("blade"), e.Vector("sword")); c > 0.2 {
		t.Fatalf("blade and sword: cosine %.3f; the embedder is lexical and should not relate them", c)
	}
}

func TestWeightedVector(t *testing.T) {
	e, _ := NewOfflineEmbedder(0)
	doc := e.Vector("Alice sold the sword")
	plain := e.WeightedVector("Alice sword", nil)
	if diff := cmp.Diff(e.Vector("Alice sword"), plain); diff != "" {
		t.Fatalf("nil weight differs from Vector:\n%s", diff)
	}
	// Weighting "alice" down leaves mostly "sword": the query then looks
	// like a text about swords more than one about Alice.
	w := e.WeightedVector("Alice sword", func(word string) float64 {
		if word == "alice" {
			return 0.1
		}
		return 3
	})
	aboutSword, aboutAlice := e.Vector("a sword"), e.Vector("Alice")
	if cosine(w, aboutSword) <= cosine(plain, aboutSword) || cosine(w, aboutAlice) >= cosine(plain, aboutAlice) {
		t.Fatalf("weights had no effect: sword %.3f→%.3f, alice %.3f→%.3f",
			cosine(plain, aboutSword), cosine(w, aboutSword), cosine(plain, aboutAlice), cosine(w, aboutAlice))
	}
	if cosine(w, doc) <= 0 {
		t.Fatalf("weighted query unrelated to the document")
	}
	zero := e.WeightedVector("Alice sword", func(string) float64 { return 0 })
	if n := cosine(zero, zero); n != 0 {
		t.Fatalf("all weights 0: norm² %v, want 0", n)
	}
}

func TestNewOfflineEmbedderDims(t *testing.T) {
	for _, tc := range []struct {
		dims, want int
		ok         bool
	}{{0, 256, true}, {32, 32, true}, {512, 512, true}, {4096, 4096, true}, {31, 0, false}, {4097, 0, false}, {-1, 0, false}} {
		e, err := NewOfflineEmbedder(tc.dims)
		if (err == nil) != tc.ok {
			t.Fatalf("dims %d: err %v", tc.dims, err)
		}
		if err == nil && (e.Dims() != tc.want || len(e.Vector("sword")) != tc.want) {
			t.Fatalf("dims %d: got %d", tc.dims, e.Dims())
		}
	}
}

func TestOfflineEmbedderHonoursContext(t *testing.T) {
	e, _ := NewOfflineEmbedder(0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, []string{"a"}); CodeOf(err) != CodeTimeout {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestStem(t *testing.T) {
	tests := map[string]string{
		"swords": "sword", "sword": "sword", "running": "run", "painted": "paint", "stories": "story",
		"studied": "study", "making": "mak", "make": "mak", "stopped": "stop", "filled": "fill",
		"glass": "glass", "bus": "bus", "his": "his", "quickly": "quick", "cat": "cat", "was": "was",
	}
	for in, want := range tests {
		if got := Stem(in); got != want {
			t.Errorf("Stem(%q) = %q, want %q", in, got, want)
		}
	}
}

// Splitting words is on every search's path: it must not build anything
// per word beyond the word itself.
func TestOfflineWordsAllocations(t *testing.T) {
	text := "Alice's sword: the north road is long, and don’t trust the miller"
	if got := strings.Join(offlineWords(text), " "); got != "alice sword the north road is long and dont trust the miller" {
		t.Fatalf("offlineWords = %q", got)
	}
	// One allocation per word kept, and a few for the growing slice.
	if allocs := testing.AllocsPerRun(20, func() { offlineWords(text) }); allocs > 20 && !raceEnabled {
		t.Fatalf("offlineWords allocates %.0f times for 11 words", allocs)
	}
}
