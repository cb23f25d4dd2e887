package journal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/npcd/npcd/llm"
)

// benchWords build synthetic memories: every word is shared by thousands of
// the 100k memories, so a query matches many rows, as with an NPC that has
// lived long in one village.
var benchWords = struct{ who, verb, adj, thing, place []string }{
	who: strings.Fields(`Alice Bob Carol Dmitri Edda Farid Greta Hamid Ines Jorah Kaia Lucan Mira Nadim Orla Pell
		Quinn Rhea Soren Tamsin Ulla Varo Wren Xan Yara Zed Brom Hilde Osric Sable Tovin Ulric Vesna Wendel Ysolde`),
	verb: strings.Fields(`lost found sold bought stole forged repaired hid buried promised owes borrowed gave
		traded broke painted carried dropped returned wanted feared admired cursed blessed remembered`),
	adj: strings.Fields(`old rusty silver golden broken heavy tiny cursed blessed red black white ancient
		shiny cracked wooden iron copper jeweled famous stolen forgotten secret lucky`),
	thing: strings.Fields(`sword axe shield ring amulet key map lantern horse cart boots cloak hammer anvil
		letter book coin debt promise bread ale wine goat chicken dagger bow arrow helm`),
	place: strings.Fields(`forge tavern market well mill chapel bridge river gate tower farm harbor inn square
		barn stable quarry mine forest road camp`),
}

// benchCorpus makes memories from two parts: a sentence of words every
// memory shares with thousands of others, and two detail words drawn from
// 20,000 made-up words with Zipf's law, as the names, places and things of
// a long life are: a few are everywhere, most are rare.
type benchCorpus struct {
	r      *rand.Rand
	zipf   *rand.Zipf
	detail []string
}

func newBenchCorpus() *benchCorpus {
	r := rand.New(rand.NewPCG(1, 2))
	syl := strings.Fields("ka lo mi ru se ta ve no pa ri do fu ge ha ji ko lu ma ne ol")
	seen := map[string]bool{}
	var detail []string
	for len(detail) < 20000 {
		n := 2 + r.IntN(3)
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(syl[r.IntN(len(syl))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			detail = append(detail, w)
		}
	}
	return &benchCorpus{r: r, zipf: rand.NewZipf(r, 1.1, 1, uint64(len(detail)-1)), detail: detail}
}

func (c *benchCorpus) text() string {
	w := benchWords
	pick := func(s []string) string { return s[c.r.IntN(len(s))] }
	return fmt.Sprintf("%s %s the %s %s at the %s near %s, and %s %s a %s %s from %s.",
		pick(w.who), pick(w.verb), pick(w.adj), pick(w.thing), pick(w.place), c.detail[c.zipf.Uint64()],
		pick(w.who), pick(w.verb), pick(w.adj), pick(w.thing), c.detail[c.zipf.Uint64()])
}

// seedMemories inserts n memories for npc with their offline vectors, in
// large transactions: the retriever's cost is measured, not the setup's.
func seedMemories(b *testing.B, e *testEnv, npc string, n int) {
	b.Helper()
	ctx := context.Background()
	emb, _ := llm.NewOfflineEmbedder(0)
	c := newBenchCorpus()
	r := rand.New(rand.NewPCG(3, 4))
	const batch = 2000
	for start := 0; start < n; start += batch {
		ms := make([]*Memory, 0, batch)
		for i := start; i < min(n, start+batch); i++ {
			m := &Memory{Content: c.text(), Importance: 1 + r.IntN(10), GameTime: t0.Add(-time.Duration(r.IntN(365*24)) * time.Hour)}
			if err := prepareMemory(npc, m, time.Now().UTC()); err != nil {
				b.Fatal(err)
			}
			m.Embedding, m.EmbedModel = EncodeVector(emb.Vector(m.Content)), emb.Model()
			m.Rev = 1
			ms = append(ms, m)
		}
		if err := e.db.WithContext(ctx).CreateInBatches(ms, 500).Error; err != nil {
			b.Fatal(err)
		}
	}
	if err := e.db.Exec(`INSERT INTO memory_revs (character_id, rev) VALUES (?, 1)`, npc).Error; err != nil {
		b.Fatal(err)
	}
}

// benchQueries returns the search benchmarks' queries over corpus c:
// queries of common words only, and queries naming a detail word of every
// rarity, from everywhere (the first) to once or twice.
func benchQueries(c *benchCorpus) []string {
	queries := []string{
		"who lost the rusty sword at the forge?",
		"what does Alice owe Bob",
		"the golden ring hidden near the well",
		"did anyone repair the broken cart by the mill",
	}
	for _, rank := range []int{0, 3, 30, 300, 3000, 19000} {
		d := c.detail[rank]
		queries = append(queries, "what happened near "+d, "Mira promised a horse from "+d, "the cursed amulet and "+d+" at the tower")
	}
	return queries
}

// BenchmarkSearch100kMemories searches one NPC holding 100k memories with
// the default retriever (offline embedder, hybrid ranking) and reports the
// p50 and p99 latency of a search, the index already in memory.
func BenchmarkSearch100kMemories(b *testing.B) {
	e := newEnv(b)
	e.npc(b, "brom", t0)
	seedMemories(b, e, "brom", 100_000)
	ret := e.retriever(b)
	ctx := context.Background()
	queries := benchQueries(newBenchCorpus())
	if _, err := ret.Search(ctx, "brom", queries[0], 10); err != nil { // builds the index
		b.Fatal(err)
	}
	var took []time.Duration
	i := 0
	for b.Loop() {
		start := time.Now()
		rs, err := ret.Search(ctx, "brom", queries[i%len(queries)], 10)
		took = append(took, time.Since(start))
		if err != nil || len(rs) != 10 {
			b.Fatalf("search: %d results, %v", len(rs), err)
		}
		i++
	}
	reportLatency(b, took)
}

// reportLatency reports the median and 99th percentile of a benchmark's
// timed searches, in milliseconds.
func reportLatency(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	q := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// BenchmarkScan100k compares, on 100k indexed texts, the two scans every
// search makes over all of an NPC's rows: the cosine with the embedder's
// vectors (256 int8 codes per row) and the semantic channel's (100 int8 per
// row, its query vector included).
func BenchmarkScan100k(b *testing.B) {
	r, err := NewRetriever(NewStore(nil))
	if err != nil {
		b.Fatal(err)
	}
	emb, _ := llm.NewOfflineEmbedder(0)
	x := newIndex("brom")
	x.wv = r.words
	c := newBenchCorpus()
	for i := 0; i < 100_000; i++ {
		text := c.text()
		p := x.add(item{id: int64(i + 1), kind: kindMemory}, text)
		if err := x.setVec(p, emb.Vector(text)); err != nil {
			b.Fatal(err)
		}
	}
	terms := Terms("who lost the rusty sword at the forge?")
	b.Run("vector", func(b *testing.B) {
		q := emb.Vector("who lost the rusty sword at the forge?")
		for b.Loop() {
			x.scan(q)
		}
	})
	b.Run("semantic", func(b *testing.B) {
		for b.Loop() {
			x.scanSemantic(x.semQuery(terms))
		}
	})
	// The same vectors packed, as a cache over its budget holds them.
	before := x.vecs.bytes()
	x.packVectors()
	b.Logf("vectors: %d bytes whole, %d packed", before, x.vecs.bytes())
	b.Run("vector-packed", func(b *testing.B) {
		q := emb.Vector("who lost the rusty sword at the forge?")
		for b.Loop() {
			x.scan(q)
		}
	})
	b.Run("vector-packed-long", func(b *testing.B) {
		q := emb.Vector("who lost the rusty sword at the forge, and what did the smith say of the wolves on the north road by the mill?")
		for b.Loop() {
			x.scan(q)
		}
	})
}

// BenchmarkFirstSearch measures an NPC's first search after a start: the
// index of its 2,000 perceived messages is built, then searched. One op is
// one first search.
func BenchmarkFirstSearch(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	e.npc(b, "brom", t0)
	c := newBenchCorpus()
	for i := 0; i < 20; i++ {
		texts := make([]string, 100)
		for j := range texts {
			texts[j] = "alice says: " + c.text()
		}
		e.say(b, "brom", t0, texts, nil)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := e.retriever(b)
		if rs, err := r.Search(ctx, "brom", "who sold the rusty sword at the forge?", 5); err != nil || len(rs) == 0 {
			b.Fatal(rs, err)
		}
	}
}
