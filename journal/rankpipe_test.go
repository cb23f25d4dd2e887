package journal

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// offlineRankIndex is rankIndex on a Retriever of the offline embedder,
// returned with it and the embedder.
func offlineRankIndex(tb testing.TB, seed uint64, n int) (*Retriever, weightedEmbedder, *npcIndex, []string) {
	tb.Helper()
	r, err := NewRetriever(NewStore(nil))
	if err != nil {
		tb.Fatal(err)
	}
	x, texts := rankIndex(tb, r, seed, n)
	return r, r.embedder.(weightedEmbedder), x, texts
}

// rankIndex builds, without a database, the index of an NPC that lived
// long: n items, mostly perceived lines in game-time order (about 270 a
// day, by a few dozen speakers), then its own lines, journal entries and
// memories about the same people, some superseded (in chains), some still
// without a vector. It returns the index and each item's text.
func rankIndex(tb testing.TB, r *Retriever, seed uint64, n int) (*npcIndex, []string) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	c := newBenchCorpus()
	c.r = rand.New(rand.NewPCG(seed+1, seed+2))
	we := r.embedder.(weightedEmbedder)
	x := newIndex("brom")
	x.wv = r.words
	var texts []string
	var memIDs []int64
	nextID := map[itemKind]int64{kindMemory: 1, kindJournal: 1, kindMessage: 1}
	at := t0.Add(-time.Duration(n) * 315 * time.Second).Unix()
	for i := 0; i < n; i++ {
		at += int64(rng.IntN(630))
		var it item
		var text string
		switch u := rng.IntN(100); {
		case u < 70:
			who := benchWords.who[rng.IntN(len(benchWords.who))]
			text = who + " says: " + c.text()
			if rng.IntN(20) == 0 {
				text = "(" + c.text() + ")"
			}
			it = item{kind: kindMessage, user: true, imp: int8(rng.IntN(11))}
			it.who = x.whoID(actorOf(text))
		case u < 82:
			text = c.text()
			it = item{kind: kindMessage, imp: int8(rng.IntN(11))}
		case u < 88:
			text = "Today " + c.text() + " " + c.text()
			it = item{kind: kindJournal, imp: int8(1 + rng.IntN(10))}
		default:
			text = c.text()
			it = item{kind: kindMemory, imp: int8(1 + rng.IntN(10))}
			it.who = x.whoID(benchWords.who[rng.IntN(len(benchWords.who))])
		}
		if rng.IntN(50) == 0 {
			text = "zzq xyzzy plugh" // no known word, no vector worth the name
		}
		it.id = nextID[it.kind]
		nextID[it.kind]++
		it.gameTime = at
		if it.kind == kindMemory {
			it.gameTime = at - int64(rng.IntN(90*86400))
			memIDs = append(memIDs, it.id)
		}
		p := x.add(it, text)
		texts = append(texts, text)
		if rng.IntN(40) != 0 { // some wait for a vector
			if err := x.setVec(p, we.WeightedVector(text, nil)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	// Supersession points at a newer memory, sometimes in chains, sometimes
	// at a memory the index does not hold.
	for i, id := range memIDs {
		if rng.IntN(6) != 0 || i+1 >= len(memIDs) {
			continue
		}
		sup := memIDs[i+1+rng.IntN(min(5, len(memIDs)-i-1))]
		if rng.IntN(10) == 0 {
			sup = memIDs[len(memIDs)-1] + 1000
		}
		x.items[x.memPos[id]].supBy = sup
	}
	return x, texts
}

// rankQueries are the queries of the ranking tests over an index built by
// rankIndex: common words, names, rare detail words, words no item holds.
func rankQueries(rng *rand.Rand, texts []string, n int) []string {
	c := newBenchCorpus()
	qs := benchQueries(c)
	qs = append(qs, "what does Kaia think of Osric", "xyzzy", "nothing matches qqqq wwww")
	for len(qs) < n {
		t := ftsWords(texts[rng.IntN(len(texts))])
		m := 1 + rng.IntN(5)
		var b strings.Builder
		for i := 0; i < m; i++ {
			b.WriteString(t[rng.IntN(len(t))] + " ")
		}
		if rng.IntN(3) == 0 {
			b.WriteString(benchWords.who[rng.IntN(len(benchWords.who))])
		}
		qs = append(qs, b.String())
	}
	return qs
}

// rankRun is the in-memory part of a search (Retriever.search without the
// reads of the database): scans, keyword channel, ranking, and feedback's
// second keyword search and ranking with the words more gives.
type rankRun struct {
	hits   []kwHit
	ranked []candidate
	fbHits []kwHit
	final  []candidate
	scores []float32
	sem    []float32
}

// feedbackWords stands for feedbackTerms, which reads rows: words of the
// leading perceived messages the query lacks.
func feedbackWordsOf(x *npcIndex, texts []string, ranked []candidate, terms []string) []string {
	var out []string
	n := 0
	for _, c := range ranked {
		if n == feedbackDocs {
			break
		}
		if c.kind != kindMessage || !x.items[c.p].user {
			continue
		}
		n++
		for _, w := range ftsWords(texts[c.p]) {
			if searchable(w) && !strings.Contains(strings.Join(terms, " "), w) && len(out) < feedbackWords {
				out = append(out, w)
			}
		}
	}
	return out
}

func runRank(r *Retriever, x *npcIndex, texts []string, qv []float32, terms []string, k int, o SearchOptions, ref bool) rankRun {
	x.bound = o.Window
	defer func() { x.bound, x.qv, x.semQ = 0, nil, nil }()
	x.sparse = false
	var out rankRun
	now := r.now(x)
	pool := max(r.cfg.pool, 4*k)
	if ref {
		refScan(x, qv)
		if x.wv != nil {
			q, s := x.semQuery(terms)
			refScanSemantic(x, q, s)
		}
		out.hits = refKeyword(x, terms, pool, r.cfg.wExpand, r.cfg.lengthNorm)
		named := refNamed(x, terms)
		out.ranked = refRank(r, x, qv != nil, x.wv != nil, out.hits, pool, now, named)
		out.final = out.ranked
		if r.cfg.wFeedback > 0 && !o.NoFeedback {
			if more := feedbackWordsOf(x, texts, out.ranked, terms); len(more) > 0 {
				out.fbHits = refAddHits(out.hits, refKeyword(x, more, pool, 0, r.cfg.lengthNorm), r.cfg.wFeedback)
				out.final = refRank(r, x, qv != nil, x.wv != nil, out.fbHits, pool, now, named)
			}
		}
	} else {
		x.scan(qv)
		if x.wv != nil {
			x.scanSemantic(x.semQuery(terms))
		}
		out.hits = x.keyword(terms, pool, r.cfg.wExpand, r.cfg.lengthNorm)
		named := x.named(terms)
		// rank's result is in scratch memory the next rank reuses: copy.
		out.ranked = slices.Clone(r.rank(x, qv != nil, x.wv != nil, out.hits, pool, now, named))
		out.final = out.ranked
		if r.cfg.wFeedback > 0 && !o.NoFeedback {
			if more := feedbackWordsOf(x, texts, out.ranked, terms); len(more) > 0 {
				out.fbHits = addHits(out.hits, x.keyword(more, pool, 0, r.cfg.lengthNorm), r.cfg.wFeedback)
				out.final = r.rank(x, qv != nil, x.wv != nil, out.fbHits, pool, now, named)
			}
		}
	}
	out.final = slices.Clone(out.final)
	out.scores = append([]float32(nil), x.scores...)
	out.sem = append([]float32(nil), x.semScores...)
	return out
}

func sameHits(a, b []kwHit) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d hits, reference %d", len(a), len(b))
	}
	for i := range a {
		if a[i].kind != b[i].kind || a[i].id != b[i].id || math.Float64bits(a[i].score) != math.Float64bits(b[i].score) {
			return fmt.Errorf("hit %d: %+v, reference %+v", i, a[i], b[i])
		}
	}
	return nil
}

func sameCandidates(a, b []candidate) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d candidates, reference %d", len(a), len(b))
	}
	bits := func(c candidate) [11]uint64 {
		p := c.parts
		f := math.Float64bits
		return [11]uint64{f(c.score), f(p.vector), f(p.keyword), f(p.semantic), f(p.neighbour), f(p.entity),
			f(p.relevance), f(p.recency), f(p.importance), f(p.session), uint64(c.p)}
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.kind != y.kind || x.id != y.id || bits(x) != bits(y) || x.parts.ranked != y.parts.ranked || x.parts.superseded != y.parts.superseded {
			return fmt.Errorf("candidate %d: %+v, reference %+v", i, x, y)
		}
	}
	return nil
}

func sameFloats(a, b []float32) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d scores, reference %d", len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return fmt.Errorf("score %d: %v, reference %v", i, a[i], b[i])
		}
	}
	return nil
}

// TestRankMatchesReference checks that the ranking returns exactly what the
// reference implementation (rankref_test.go) returns: the same keyword hits,
// the same candidates in the same order with bit-identical scores and parts,
// over indexes of several sizes and retrievers of several settings, bounded
// and unbounded searches, with and without a query vector.
func TestRankMatchesReference(t *testing.T) {
	sizes := []int{1, 2, 7, 60, 700, 5000}
	if testing.Short() {
		sizes = []int{1, 7, 700}
	}
	configs := []struct {
		name string
		opts []Option
	}{
		{"default", nil},
		{"no-neighbour-session", []Option{WithNeighbours(0), WithSession(0), WithEntity(0)}},
		{"heavy", []Option{WithNeighbours(1), WithSession(2), WithEntity(4), WithExpansion(1), WithFeedback(1), WithLengthNorm(1), WithWeights(1, 0.2)}},
		{"no-semantic", []Option{WithSemantic(0), WithExpansion(0), WithRecency(0, 0)}},
	}
	sparse := 0
	defer func() {
		if sparse == 0 {
			t.Error("no search used the sparse dot product")
		}
	}()
	for _, cfg := range configs {
		r, err := NewRetriever(NewStore(nil), cfg.opts...)
		if err != nil {
			t.Fatal(err)
		}
		we := r.embedder.(weightedEmbedder)
		for si, n := range sizes {
			x, texts := rankIndex(t, r, uint64(17*si+1), n)
			x.wv = r.words
			rng := rand.New(rand.NewPCG(uint64(n), 99))
			for qi, query := range rankQueries(rng, texts, 24) {
				terms := Terms(query)
				if len(terms) == 0 {
					continue
				}
				var qv []float32
				if qi%5 != 4 {
					qv = we.WeightedVector(query, x.idf)
					unit(qv)
				}
				for _, o := range []SearchOptions{{}, {NoFeedback: true, Window: 2048}, {Window: 64}, {NoFeedback: true, Window: 1}} {
					for _, k := range []int{10, 40} {
						want := runRank(r, x, texts, qv, terms, k, o, true)
						got := runRank(r, x, texts, qv, terms, k, o, false)
						if x.sparse {
							sparse++
						}
						where := fmt.Sprintf("%s n=%d query %q %+v k=%d", cfg.name, n, query, o, k)
						for _, err := range []error{sameFloats(got.scores, want.scores), sameFloats(got.sem, want.sem),
							sameHits(got.hits, want.hits), sameCandidates(got.ranked, want.ranked),
							sameHits(got.fbHits, want.fbHits), sameCandidates(got.final, want.final)} {
							if err != nil {
								t.Fatalf("%s: %v", where, err)
							}
						}
					}
				}
			}
		}
	}
}

// BenchmarkRankWindow measures the in-memory ranking of the working
// context's search (SearchOptions{NoFeedback: true, Window: 2048}) at a
// long-lived NPC of 6,000 items: the scans, the keyword channel and rank,
// everything a tick's recall does besides reading the results' rows.
func BenchmarkRankWindow(b *testing.B) {
	r, we, x, texts := offlineRankIndex(b, 1, 6000)
	rng := rand.New(rand.NewPCG(7, 8))
	queries := rankQueries(rng, texts, 64)
	type q struct {
		terms []string
		qv    []float32
	}
	var qs []q
	for _, query := range queries {
		if terms := Terms(query); len(terms) > 0 {
			qv := we.WeightedVector(query, x.idf)
			unit(qv)
			qs = append(qs, q{terms, qv})
		}
	}
	x.ensureSemantic()
	o := SearchOptions{NoFeedback: true, Window: 2048}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		q := qs[i%len(qs)]
		runRankBench(r, x, q.qv, q.terms, 10, o)
		i++
	}
}

// runRankBench is the production half of runRank, without the copies.
func runRankBench(r *Retriever, x *npcIndex, qv []float32, terms []string, k int, o SearchOptions) []candidate {
	x.bound = o.Window
	defer func() { x.bound, x.qv, x.semQ = 0, nil, nil }()
	now := r.now(x)
	pool := max(r.cfg.pool, 4*k)
	x.scan(qv)
	if x.wv != nil {
		x.scanSemantic(x.semQuery(terms))
	}
	hits := x.keyword(terms, pool, r.cfg.wExpand, r.cfg.lengthNorm)
	return r.rank(x, qv != nil, x.wv != nil, hits, pool, now, x.named(terms))
}

// TestSparseDot8 checks that the sparse dot product of codes returns
// dot8's, for codes of every length with few or many zeros and the
// extreme codes among them.
func TestSparseDot8(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var sv sparse8
	for trial := 0; trial < 20000; trial++ {
		d := 1 + rng.IntN(40)
		if trial%10 == 0 {
			d = 256
		}
		a, b := make([]int8, d), make([]int8, d)
		zeros := rng.Float64()
		for i := range a {
			a[i], b[i] = int8(rng.IntN(256)-128), int8(rng.IntN(256)-128)
			if rng.Float64() < zeros {
				a[i] = 0
			}
		}
		sv.set(a)
		if got, want := sv.dot(b), dot8(a, b); got != want {
			t.Fatalf("d=%d: sparse %d, dot8 %d\na=%v\nb=%v", d, got, want, a, b)
		}
	}
}

// TestScanNonFinite checks that a NaN or an infinity in a vector counts as
// 0: the item's other elements still score it, a vector of nothing else
// scores nothing, and the scans stay sparse and finite.
func TestScanNonFinite(t *testing.T) {
	x := newIndex("brom")
	const d = 16
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	vecs := make([][]float32, 5)
	for i := range vecs {
		p := x.add(item{id: int64(i + 1), kind: kindMemory}, "text")
		v := make([]float32, d)
		v[0], v[i+1] = 1, 1
		switch i {
		case 2:
			v[9] = nan
		case 3:
			v[9] = inf
		case 4:
			for j := range v {
				v[j] = nan
			}
		}
		vecs[i] = v
		if err := x.setVec(p, v); err != nil {
			t.Fatal(err)
		}
	}
	q := make([]float32, d)
	q[0] = 1 // one element set: sparse
	refScan(x, q)
	want := slices.Clone(x.scores)
	x.scan(q)
	if !x.sparse {
		t.Fatal("the scan is not sparse")
	}
	if err := sameFloats(x.scores, want); err != nil {
		t.Fatal(err)
	}
	for i, s := range x.scores {
		if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
			t.Fatalf("item %d scores %v", i, s)
		}
	}
	// Items 0, 2 and 3 hold the same finite elements.
	if x.scores[2] != x.scores[0] || x.scores[3] != x.scores[0] || math.Abs(float64(x.scores[0])-math.Sqrt(0.5)) > 0.01 {
		t.Fatalf("scores %v, want items 0, 2 and 3 at the cosine %v", x.scores, math.Sqrt(0.5))
	}
	if x.scores[4] != 0 || x.vecScale[4] != 0 {
		t.Fatalf("the vector of NaNs scores %v, scale %v", x.scores[4], x.vecScale[4])
	}
	x.bound = 1 // item 2 before the scan: vecAt computes it
	x.scan(q)
	if s := x.vecAt(2); s != want[2] {
		t.Fatalf("vecAt of the NaN vector: %v, want %v", s, want[2])
	}
}

// userRank holds each item's place among the perceived messages, which
// the neighbour bonus and the window read in place of a search of users.
func TestUserRankMatchesUsers(t *testing.T) {
	_, _, x, _ := offlineRankIndex(t, 3, 500)
	if len(x.userRank) != len(x.items) || len(x.users) == 0 {
		t.Fatalf("%d ranks for %d items, %d perceived", len(x.userRank), len(x.items), len(x.users))
	}
	for p, it := range x.items {
		rank, ok := slices.BinarySearch(x.users, int32(p))
		if !it.user {
			rank, ok = -1, false
		}
		if got := x.userRank[p]; int(got) != rank || ok != (got >= 0) {
			t.Fatalf("item %d (perceived %v): rank %d, want %d", p, it.user, got, rank)
		}
	}
}

// A keyword hit carries the position of its row's item, which ranking
// reads in place of looking the row up.
func TestKeywordHitsCarryTheirPosition(t *testing.T) {
	r, _, x, texts := offlineRankIndex(t, 5, 500)
	rng := rand.New(rand.NewPCG(9, 10))
	n := 0
	for _, q := range rankQueries(rng, texts, 32) {
		for _, h := range x.keyword(Terms(q), 40, r.cfg.wExpand, r.cfg.lengthNorm) {
			n++
			if p, ok := x.position(h.kind, h.id); !ok || p != h.p {
				t.Fatalf("hit %+v: the row's item is at %d (%v)", h, p, ok)
			}
		}
	}
	if n == 0 {
		t.Fatal("no hits")
	}
}

// A lexical embedder's query vector is made in the index's scratch, search
// after search: each must be what the embedder makes afresh, nothing of the
// query before left in it.
func TestQueryVectorReusesItsScratch(t *testing.T) {
	r, we, x, texts := offlineRankIndex(t, 5, 300)
	rng := rand.New(rand.NewPCG(7, 8))
	queries := append(rankQueries(rng, texts, 12), "", "the and of", "a much longer query about the swords Alice lost at the forge")
	var prev []float32
	for _, q := range queries {
		got, err := r.queryVector(t.Context(), x, q)
		if err != nil {
			t.Fatal(err)
		}
		want := we.WeightedVector(q, x.idf)
		unit(want)
		if len(got) != len(want) {
			t.Fatalf("%q: %d dimensions, want %d", q, len(got), len(want))
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%q: dimension %d is %v, want %v", q, i, got[i], want[i])
			}
		}
		if prev != nil && &got[0] != &prev[0] {
			t.Fatalf("%q: the query vector was allocated anew", q)
		}
		prev = got
	}
}

// The scan's scores of the offline embedder's vectors, query and items
// quantized, are their cosines within the error of the int8 codes; an
// item waiting for its vector (rankIndex leaves some) scores 0.
func TestScanScoresAreCosines(t *testing.T) {
	_, we, x, texts := offlineRankIndex(t, 11, 800)
	rng := rand.New(rand.NewPCG(1, 2))
	waiting := 0
	for _, s := range x.vecScale {
		if s == 0 {
			waiting++
		}
	}
	if waiting == 0 || waiting > len(texts)/10 {
		t.Fatalf("%d of %d items without a vector", waiting, len(texts))
	}
	sparse, worst := 0, 0.0
	for _, query := range rankQueries(rng, texts, 24) {
		qv := we.WeightedVector(query, x.idf)
		unit(qv)
		x.scan(qv)
		if x.sparse {
			sparse++
		}
		for p, text := range texts {
			want := cosine(qv, we.WeightedVector(text, nil))
			if x.vecScale[p] == 0 {
				want = 0
			}
			d := math.Abs(float64(x.scores[p]) - want)
			worst = max(worst, d)
			if d > 0.02 {
				t.Fatalf("%q, item %d: %v, cosine %v", query, p, x.scores[p], want)
			}
		}
	}
	if sparse == 0 {
		t.Fatal("no query scanned sparse")
	}
	t.Logf("worst error %.4f, %d sparse scans", worst, sparse)
}
