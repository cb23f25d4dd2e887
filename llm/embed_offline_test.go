package llm

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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

// scanWords returns the words an offlineScanner reads from text.
func scanWords(text string) []string {
	var out []string
	s := offlineScanner{text: text}
	for {
		padded, same, ok := s.next(nil)
		if !ok {
			return out
		}
		w := string(padded[1 : len(padded)-1])
		if same != (w == text[s.start:s.end]) {
			panic(fmt.Sprintf("%q: word %q, same %v, but read from %q", text, w, same, text[s.start:s.end]))
		}
		out = append(out, w)
	}
}

// Embedding is on every search's path: it must not build anything per word.
func TestOfflineEmbedderAllocations(t *testing.T) {
	text := "Alice's sword: the north road is long, and don’t trust the miller"
	if got := strings.Join(scanWords(text), " "); got != "alice sword the north road is long and dont trust the miller" {
		t.Fatalf("words = %q", got)
	}
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	e, _ := NewOfflineEmbedder(0)
	// The vector only.
	if allocs := testing.AllocsPerRun(20, func() { e.Vector(text) }); allocs != 1 {
		t.Fatalf("Vector allocates %.0f times", allocs)
	}
	// And the words weight is given that text does not spell as they are:
	// "alice" ("dont" is a stop word, never weighed).
	weight := func(string) float64 { return 2 }
	if allocs := testing.AllocsPerRun(20, func() { e.WeightedVector(text, weight) }); allocs != 2 {
		t.Fatalf("WeightedVector allocates %.0f times", allocs)
	}
}

// offlineTexts are texts of every kind the embedder must read as it always
// has: stored vectors are compared with new ones under the same model name.
var offlineTexts = []string{
	"", " ", "'", "’s", "a", "I", "Alice's sword", "ALICE’S SWORD", "don't", "don’t", "rock'n'roll", "o'clock",
	"James'", "James's", "x's's", "x’s's", "x's’s", "x’s’s", "'s's", "s''", "it's", "its", "'tis", "a'b'c'd's",
	"Alice lost her sword at the forge.", "the swords Alice was losing near a forge", "the and of it",
	"Ünïcödé wörds 東京", "İstanbul ǅemal ΣΊΣΥΦΟΣ ß ẞ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 and 𝟙𝟚𝟛", "١٢٣ ٤٥٦ digits", "Ⅻ roman Ⅳ",
	"stories studied making make stopped filled glass bus his quickly cat was assemblies rallies sillies",
	"lies dies ties pies flies cries allies bullies applied buzzing fizzed fully jelly belly tallying",
	"sss ssss sses ssses ies iess ied ieds ing ings lying eyes ees ee e es ss us is ly lys",
	"caffè naïve façade résumé über-cool co-operate e-mail C++ C# .NET 3.14 1,000,000 2026-11-26",
	"invalid \xff\xfe bytes \xc3 in \xe2\x80 words\x99 and \xed\xa0\x80 surrogates",
	"sword\xffsmith\xc3\xa9e \xe2\x80\x99s", "\xe2\x80\x99tis", "a\u2019\u2019s", "\u00a0non\u2009breaking\u200bspaces",
	"a-very-long-word-" + strings.Repeat("supercalifragilistic", 8) + "'s end",
	strings.Repeat("Ä", 70) + " " + strings.Repeat("é", 40) + "ies",
	"[Day 3, 14:05] Bob (player) says: \"Have you seen Alice's sword? She said she'd left it at the forge.\"",
}

// randomOfflineText makes a text of words, apostrophes, capitals, non-ASCII and
// invalid bytes.
func randomOfflineText(r *rand.Rand) string {
	pieces := []string{"a", "e", "s", "y", "l", "i", "d", "n", "g", "S", "E", "Y", "'", "’", "'s", "’s", "ies", "ied",
		"ing", "ed", "ly", "ss", " ", " ", "  ", ".", ",", "-", "0", "9", "é", "É", "ß", "İ", "Σ", "東", "😀", "\xff",
		"\xe2\x80", "\x99", "\xc3", "ǅ", "ﬁ", "\u0301", "\u00a0", "the", "and", "its", "don't", "swords", "forge",
		"Alice", "Bob", "stories", "making", "\x00", "\t", "\n"}
	var b strings.Builder
	for range r.IntN(40) {
		if r.IntN(8) == 0 {
			b.WriteByte(byte(r.IntN(256)))
			continue
		}
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// TestOfflineEmbedderMatchesReference compares the embedder with its
// reference (embed_offline_ref_test.go): the same words, stems, weights
// asked for, and vectors to the bit.
func TestOfflineEmbedderMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	texts := append([]string(nil), offlineTexts...)
	texts = append(texts, offlineBenchTexts...)
	for range 20000 {
		texts = append(texts, randomOfflineText(r))
	}
	for _, dims := range []int{32, 256, 1000} {
		e, _ := NewOfflineEmbedder(dims)
		for _, text := range texts {
			if dims == 256 {
				words, want := scanWords(text), refOfflineWords(text)
				if !slices.Equal(words, want) {
					t.Fatalf("%q: words %q, want %q", text, words, want)
				}
				for _, w := range words {
					if got, want := Stem(w), refStem(w); got != want {
						t.Fatalf("Stem(%q) = %q, want %q", w, got, want)
					}
				}
			}
			equalVectors(t, text, e.Vector(text), e.refWeightedVector(text, nil))
			var asked, refAsked []string
			weight := func(asked *[]string) func(string) float64 {
				return func(w string) float64 {
					*asked = append(*asked, w)
					// Weights of every sign, zero included.
					return float64(fnvFinish(fnvBytes(fnvOffset, w))%7) - 1.5
				}
			}
			got := e.WeightedVector(text, weight(&asked))
			want := e.refWeightedVector(text, weight(&refAsked))
			if !slices.Equal(asked, refAsked) {
				t.Fatalf("%q: weight asked for %q, want %q", text, asked, refAsked)
			}
			equalVectors(t, text, got, want)
		}
	}
}

func equalVectors(t *testing.T, text string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%q: %d dims, want %d", text, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%q: dimension %d is %v, want %v", text, i, got[i], want[i])
		}
	}
}

// Stem is exported: it must keep its answers for any string, not only for
// the words the embedder reads.
func TestStemMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	letters := []string{"a", "e", "s", "y", "l", "i", "d", "n", "g", "u", "z", "p", "ies", "ied", "ing", "ed", "ly", "ss", "us", "é", "\xff", "\x80", "'"}
	for range 200000 {
		var b strings.Builder
		for range r.IntN(9) {
			b.WriteString(letters[r.IntN(len(letters))])
		}
		w := b.String()
		if got, want := Stem(w), refStem(w); got != want {
			t.Fatalf("Stem(%q) = %q, want %q", w, got, want)
		}
	}
}

func FuzzOfflineEmbedder(f *testing.F) {
	for _, text := range offlineTexts {
		f.Add(text)
	}
	e, _ := NewOfflineEmbedder(64)
	f.Fuzz(func(t *testing.T, text string) {
		if got, want := scanWords(text), refOfflineWords(text); !slices.Equal(got, want) {
			t.Fatalf("words %q, want %q", got, want)
		}
		equalVectors(t, text, e.Vector(text), e.refWeightedVector(text, nil))
		if got, want := Stem(text), refStem(text); got != want {
			t.Fatalf("Stem = %q, want %q", got, want)
		}
	})
}

// offlineBenchTexts are texts of the length and kind a tick embeds: a
// perceived event, a reply, a query.
var offlineBenchTexts = []string{
	"[Day 3, 14:05] Bob (player) says: \"Have you seen Alice's sword? She said she'd left it at the forge near the north road.\"",
	"I haven’t seen it since the storm. Ask the miller; he was repairing the cart by the river when the dragons burned the mill.",
	"what does Bob want from the blacksmith",
	"Ünïcödé wörds 東京 and the STÖRIES of the Swordsmiths' guild, 1842–1901.",
}

func BenchmarkOfflineVector(b *testing.B) {
	e, _ := NewOfflineEmbedder(0)
	idf := func(w string) float64 { return 1 + float64(len(w)%5) }
	b.ReportAllocs()
	for b.Loop() {
		for i, t := range offlineBenchTexts {
			if i == 2 {
				e.WeightedVector(t, idf)
			} else {
				e.Vector(t)
			}
		}
	}
}

func TestAppendWeightedVector(t *testing.T) {
	e, _ := NewOfflineEmbedder(64)
	weight := func(w string) float64 { return float64(len(w)) }
	// Spare capacity holding another text's vector is overwritten.
	prefix := []float32{1, 2, 3}
	buf := append(make([]float32, 0, len(prefix)+64), prefix...)
	buf = append(buf, e.Vector("the dragon burned the mill")...)
	for _, text := range []string{"Alice lost her sword at the forge", "", "the and of it", "Ünïcödé wörds"} {
		got := e.AppendWeightedVector(buf[:len(prefix)], text, weight)
		if !slices.Equal(got[:len(prefix)], prefix) {
			t.Fatalf("%q: prefix %v", text, got[:len(prefix)])
		}
		if &got[0] != &buf[0] {
			t.Fatalf("%q: reallocated with room to spare", text)
		}
		equalVectors(t, text, got[len(prefix):], e.WeightedVector(text, weight))
	}
	if raceEnabled {
		return
	}
	if allocs := testing.AllocsPerRun(20, func() { e.AppendWeightedVector(buf[:0], "alice lost her sword", weight) }); allocs != 0 {
		t.Fatalf("AppendWeightedVector allocates %.0f times with room to spare", allocs)
	}
}
