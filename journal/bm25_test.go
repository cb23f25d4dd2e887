package journal

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// An NPC's ranking uses its own statistics only: another NPC's long life,
// full of the query's words, changes neither its results nor their scores.
func TestRankingIgnoresOtherNPCs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.npc(t, "a", t0)
	var texts []string
	for i := 0; i < 40; i++ {
		switch i % 4 {
		case 0:
			texts = append(texts, fmt.Sprintf("Alice lost sword number %d at the old forge.", i))
		case 1:
			texts = append(texts, fmt.Sprintf("The bread at the market costs %d copper.", i))
		case 2:
			texts = append(texts, fmt.Sprintf("Wolves were seen %d times on the north road.", i))
		default:
			texts = append(texts, fmt.Sprintf("Bob the miller owes %d silver for the forge repairs.", i))
		}
	}
	e.say(t, "a", t0, texts, nil)
	query := "where did alice lose her sword at the forge"
	top := func(r *Retriever) []Result {
		rs, err := r.Search(ctx, "a", query, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 10 {
			t.Fatalf("got %d results, want 10", len(rs))
		}
		return rs
	}
	kept := e.retriever(t)
	before := top(e.retriever(t))
	top(kept) // builds kept's index of a before b exists

	e.npc(t, "b", t0)
	var other []string
	for i := 0; i < 10000; i++ {
		other = append(other, fmt.Sprintf("Sword %d of the forge, sword and forge again; alice was here.", i))
	}
	for start := 0; start < len(other); start += 1000 {
		e.say(t, "b", t0, other[start:start+1000], nil)
	}
	if _, err := e.retriever(t).Search(ctx, "b", query, 10); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*Retriever{"new retriever": e.retriever(t), "warm retriever": kept} {
		if diff := cmp.Diff(before, top(r)); diff != "" {
			t.Fatalf("%s: top 10 of a changed when b was added (-before +after):\n%s", name, diff)
		}
	}
}

func TestKeywordBM25(t *testing.T) {
	x := newIndex("n")
	docs := []struct {
		kind itemKind
		text string
	}{
		{kindMessage, "the sword"},                              // 0: short, one rare word
		{kindMessage, "the sword is in the forge by the river"}, // 1: longer
		{kindMessage, "forge forge forge"},                      // 2: common word, repeated
		{kindMessage, "forge"},                                  // 3
		{kindJournal, "forge fire"},                             // 4
		{kindMessage, "Le café est fermé"},                      // 5
		{kindMessage, "Swords and SWORDS"},                      // 6: stems, case
	}
	for i, d := range docs {
		x.add(item{id: int64(i + 1), kind: d.kind}, d.text)
	}
	score := func(hits []kwHit, id int64) float64 {
		for _, h := range hits {
			if h.id == id {
				return h.score
			}
		}
		return 0
	}
	hits := x.keyword([]string{"sword"}, 10, 0, bm25B)
	if s0, s1 := score(hits, 1), score(hits, 2); !(s0 > s1 && s1 > 0) {
		t.Fatalf("a shorter row must score higher: %v vs %v", s0, s1)
	}
	if score(hits, 7) <= score(hits, 1) {
		t.Fatalf("two occurrences (stemmed, any case) must beat one in a row of like length: %v", hits)
	}
	hits = x.keyword([]string{"sword", "forge"}, 10, 0, bm25B)
	if score(hits, 2) <= score(hits, 4) {
		t.Fatalf("a row with both words must beat a row with the common one: %v", hits)
	}
	if s3, s4 := score(hits, 3), score(hits, 4); !(s3 > 0 && s4 > 0) || score(hits, 3) <= score(hits, 2)/10 {
		t.Fatalf("journal and message rows are ranked alike: %v", hits)
	}
	if hits := x.keyword([]string{"cafe", "ferme"}, 10, 0, bm25B); len(hits) != 1 || hits[0].id != 6 {
		t.Fatalf("diacritics must be ignored on both sides: %v", hits)
	}
	// limit applies per kind, best first.
	all := x.keyword([]string{"forge"}, 10, 0, bm25B)
	hits = x.keyword([]string{"forge"}, 1, 0, bm25B)
	if len(hits) != 2 || hits[0].kind == hits[1].kind {
		t.Fatalf("one hit per kind expected: %v", hits)
	}
	for _, h := range hits {
		for _, o := range all {
			if o.kind == h.kind && o.score > h.score {
				t.Fatalf("hit %v is not the best of its kind (%v)", h, o)
			}
		}
	}
	if x.keyword([]string{"unknown"}, 10, 0, bm25B) != nil || x.keyword(nil, 10, 0, bm25B) != nil {
		t.Fatal("no term, no hit")
	}
	// Scores are not left behind in the scratch between searches.
	a := x.keyword([]string{"sword"}, 10, 0, bm25B)
	b := x.keyword([]string{"sword"}, 10, 0, bm25B)
	if !cmp.Equal(a, b, cmp.AllowUnexported(kwHit{})) {
		t.Fatalf("repeated search differs: %v vs %v", a, b)
	}
}

func TestKeywordExpansion(t *testing.T) {
	x := newIndex("n")
	for i, text := range []string{
		"they plan an adoption",            // 1: same root as "adopt"
		"we adopt the dog at the lake",     // 2: the query's own word
		"an education in the capital",      // 3
		"they want to educate the orphans", // 4: same root as "education"
		"the lake froze",                   // 5
	} {
		x.add(item{id: int64(i + 1), kind: kindMessage}, text)
	}
	ids := func(hits []kwHit) []int64 {
		var out []int64
		for _, h := range hits {
			out = append(out, h.id)
		}
		return out
	}
	if got := ids(x.keyword([]string{"adopt"}, 10, 0, bm25B)); !cmp.Equal(got, []int64{2}) {
		t.Fatalf("without expansion only the own word matches: %v", got)
	}
	hits := x.keyword([]string{"adopt"}, 10, 0.5, bm25B)
	if got := ids(hits); !cmp.Equal(got, []int64{2, 1}) {
		t.Fatalf("expansion must reach the adoption, below the adopt: %v", got)
	}
	if got := ids(x.keyword([]string{"education"}, 10, 0.5, bm25B)); !cmp.Equal(got, []int64{3, 4}) {
		t.Fatalf("education must reach educate below itself: %v", got)
	}
	// The weight scales what a family word adds.
	low := x.keyword([]string{"adopt"}, 10, 0.25, bm25B)
	if !(low[1].score < hits[1].score && low[1].score > 0) || low[0].score != hits[0].score {
		t.Fatalf("a lower weight must lower only the family's score: %v vs %v", low, hits)
	}
	// A word with no family in the index expands to nothing.
	if got := ids(x.keyword([]string{"froze"}, 10, 1, bm25B)); !cmp.Equal(got, []int64{5}) {
		t.Fatalf("froze: %v", got)
	}
}

// A posting list reads back what was added to it, whatever the gaps and
// counts, and a bounded search's cursor at posting i (through the marks)
// reads what the whole list has from i on.
func TestPostListsReadBackWhatTheyHold(t *testing.T) {
	x := newIndex("n")
	rng := rand.New(rand.NewPCG(3, 4))
	want := map[string][]posting{}
	keys := []string{"sword", "gold", "wolf", "mill"}
	for p := range int32(5000) {
		var words []string
		for j, k := range keys {
			// gold is in nearly every item, mill in few (gaps of
			// hundreds), wolf several times in some (counts past 127).
			if rng.IntN(1000) >= []int{300, 990, 200, 5}[j] {
				continue
			}
			n := 1
			if k == "wolf" && rng.IntN(4) == 0 {
				n = 2 + rng.IntN(400)
			}
			for range n {
				words = append(words, k)
			}
			want[k] = append(want[k], posting{p: p, tf: uint16(n)})
		}
		x.addPostings(p, words)
	}
	for _, k := range keys {
		li := x.post[k]
		l := x.listAt(li)
		if got := l.all(); !cmp.Equal(got, want[k], cmp.AllowUnexported(posting{})) || l.len() != len(want[k]) {
			t.Fatalf("%s: %d postings read back, %d added (len %d)", k, len(got), len(want[k]), l.len())
		}
		if marks := len(x.marks[li]); marks != (len(want[k])-1)/postSkip {
			t.Fatalf("%s: %d marks for %d postings", k, marks, len(want[k]))
		}
		for _, i := range []int{0, 1, postSkip - 1, postSkip, postSkip + 1, 3*postSkip + 7, len(want[k]) - 1, len(want[k])} {
			if i > len(want[k]) {
				continue
			}
			var got []posting
			for c := x.from(li, i); c.more(); {
				got = append(got, c.read())
			}
			var taken []posting
			for c := x.from(li, i); c.more(); {
				taken = append(taken, c.take())
			}
			if !cmp.Equal(taken, got, cmp.AllowUnexported(posting{}), cmpopts.EquateEmpty()) {
				t.Fatalf("%s from %d: read one byte at a time (short) and each whole (read), the postings differ", k, i)
			}
			if !cmp.Equal(got, want[k][i:], cmp.AllowUnexported(posting{}), cmpopts.EquateEmpty()) {
				t.Fatalf("%s from %d: %d postings, want %d", k, i, len(got), len(want[k])-i)
			}
		}
	}
}

// The index keeps no slice of an item's text: its keys (words, families,
// names) are copies, or each would keep alive the whole text it was cut
// from.
func TestIndexKeysKeepNoText(t *testing.T) {
	x := newIndex("n")
	// Lowercase, as ftsWords would make them: its words are then slices
	// of the text itself.
	texts := []string{"mara says: the swords of the king were sold at dawn", "tobin says: wolves took the sheep near the mill",
		"brom says: adopt the adoption papers", "mara says: educate, educated, education"}
	var spans [][2]uintptr
	for i, text := range texts {
		text = strings.Clone(text)
		b := uintptr(unsafe.Pointer(unsafe.StringData(text)))
		spans = append(spans, [2]uintptr{b, b + uintptr(len(text))})
		it := item{id: int64(i + 1), kind: kindMessage, user: true}
		it.who = x.whoID(actorOf(text))
		x.add(it, text)
	}
	inText := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		for _, sp := range spans {
			if p >= sp[0] && p < sp[1] {
				return true
			}
		}
		return false
	}
	var keys []string
	for k := range x.post {
		keys = append(keys, k)
	}
	for f, ks := range x.family {
		keys = append(append(keys, f), ks...)
	}
	for k := range x.who {
		keys = append(keys, k)
	}
	if len(x.post) < 15 || len(x.who) != 3 {
		t.Fatalf("%d words, %d names indexed", len(x.post), len(x.who))
	}
	for _, k := range keys {
		if inText(k) {
			t.Fatalf("key %q is a slice of an item's text", k)
		}
	}
}

// A word whose family is its own key is not listed in x.family until its
// family has another key; queryKeys expands to a family's keys in the order
// they came either way.
func TestFamiliesListedOnlyWhenShared(t *testing.T) {
	index := func(texts ...string) *npcIndex {
		x := newIndex("n")
		for i, text := range texts {
			x.add(item{id: int64(i + 1), kind: kindMessage}, text)
		}
		return x
	}
	expand := func(x *npcIndex, term string) []string {
		keys, _ := x.queryKeys([]string{term}, 0.5)
		return keys[1:]
	}
	for _, c := range []struct {
		texts  []string
		listed int // families in x.family
		term   string
		want   []string
	}{
		// adopt is its own family's key; adoption's family is adopt.
		{[]string{"sword and gold", "adopt"}, 0, "adoption", []string{"adopt"}},
		// adoptive is neither's key, but of their family.
		{[]string{"adopt", "adoption"}, 1, "adoptive", []string{"adopt", "adoption"}},
		{[]string{"adoption", "adopt"}, 1, "adoptive", []string{"adoption", "adopt"}},
		{[]string{"adoption", "adopt"}, 1, "adopted", []string{"adoption"}},
		// educate (key educat) and education: a family of neither's key.
		{[]string{"educate", "education"}, 1, "educated", []string{"education"}},
		{[]string{"sword"}, 0, "swords", nil},
	} {
		x := index(c.texts...)
		if got := expand(x, c.term); !cmp.Equal(got, c.want, cmpopts.EquateEmpty()) || len(x.family) != c.listed {
			t.Fatalf("%q: %s expands to %v, want %v; families listed %v, want %d", c.texts, c.term, got, c.want, x.family, c.listed)
		}
	}
}

func TestLengthNormalization(t *testing.T) {
	x := newIndex("n")
	x.add(item{id: 1, kind: kindMessage}, "Mara says: my family!")
	x.add(item{id: 2, kind: kindMessage}, "Mara says: we drove north to the lake with my family and roasted chestnuts by the water every night")
	x.add(item{id: 3, kind: kindMessage}, "Tobin says: the mill wheel squeaks")
	ratio := func(b float64) float64 {
		var short, long float64
		for _, h := range x.keyword([]string{"family"}, 10, 0, b) {
			switch h.id {
			case 1:
				short = h.score
			case 2:
				long = h.score
			}
		}
		if short <= 0 || long <= 0 {
			t.Fatalf("b=%v: both lines must match: %v, %v", b, short, long)
		}
		return short / long
	}
	full, lowered, none := ratio(bm25B), ratio(DefaultLengthNorm), ratio(0)
	if !(full > lowered && lowered > 1) {
		t.Fatalf("a lower b must narrow the short line's lead: b=%v %v, b=%v %v", bm25B, full, DefaultLengthNorm, lowered)
	}
	if none != 1 {
		t.Fatalf("b=0 must ignore length: short/long = %v", none)
	}
}

func TestWithLengthNormValidates(t *testing.T) {
	e := newEnv(t)
	for _, b := range []float64{-0.1, 1.5} {
		if _, err := NewRetriever(e.jour, WithLengthNorm(b)); err == nil {
			t.Errorf("WithLengthNorm(%v): want ErrBadOption", b)
		}
	}
}

// The hits kept per kind are the best by score, then newest, whatever the
// order the postings are read in: many rows tie, and a limit keeps some.
func TestKeywordTopKMatchesSort(t *testing.T) {
	x := newIndex("n")
	for i := 0; i < 500; i++ {
		kind := kindMessage
		if i%3 == 0 {
			kind = kindJournal
		}
		text := "the forge is hot"
		switch i % 7 {
		case 0:
			text = "forge forge by the river"
		case 1:
			text = fmt.Sprintf("the river %d", i)
		case 2:
			text = "sword at the forge"
		}
		x.add(item{id: int64(i + 1), kind: kind}, text)
	}
	terms := []string{"forge", "river", "sword"}
	all := x.keyword(terms, 1000, 0, bm25B)
	for _, limit := range []int{1, 2, 5, 17, 100} {
		var want []kwHit
		n := map[itemKind]int{}
		for _, h := range all { // all is best first per kind
			if n[h.kind] < limit {
				n[h.kind]++
				want = append(want, h)
			}
		}
		got := x.keyword(terms, limit, 0, bm25B)
		if !cmp.Equal(got, want, cmp.AllowUnexported(kwHit{})) {
			t.Fatalf("limit %d: got %v, want %v", limit, got, want)
		}
	}
	for i := 1; i < len(all); i++ {
		if all[i].kind == all[i-1].kind && better(all[i], all[i-1]) {
			t.Fatalf("hits out of order at %d: %v before %v", i, all[i-1], all[i])
		}
	}
}

// addPostings indexes each item with the counts indexTerms gives, and
// leaves the scratch it reuses empty: texts of repeated, stop, one-letter and
// accented words, added one after the other to one index.
func TestAddPostingsCountsAsIndexTerms(t *testing.T) {
	x := newIndex("brom")
	texts := []string{"", "the the a", "Sword sword SWORDS of the king", "épée epee café cafe", "I owe Brom 30 gold, gold and more gold",
		strings.Repeat("wolves hungry winter ", 40), "x y z", "adopt adoption adopted"}
	for i, text := range texts {
		words := ftsWords(text)
		x.addPostings(int32(i), words)
		counts, _, n := indexTerms(words)
		got := map[string]int{}
		for k, li := range x.post {
			for _, pt := range x.listAt(li).all() {
				if pt.p == int32(i) {
					got[k] = int(pt.tf)
				}
			}
		}
		if !maps.Equal(got, counts) || x.dl[i] != uint32(n) {
			t.Fatalf("text %q: postings %v (length %d), want %v (length %d)", text, got, x.dl[i], counts, n)
		}
		sc := termScratch.Get().(*postingScratch)
		if len(sc.at) != 0 || len(sc.terms) != 0 {
			t.Fatalf("text %q: scratch left with %d keys, %d terms", text, len(sc.at), len(sc.terms))
		}
		termScratch.Put(sc)
	}
}

// An index's lists sit in blocks: each word's list is found at the number
// the map gives it, past the first block too, and the room the lists keep
// to grow is at most part of one block.
func TestPostListsSitInBlocks(t *testing.T) {
	x := newIndex("n")
	const words = 4*listBlock + 1 // one array grown by doubling would keep room for 1,022 more
	for p := range int32(words) {
		x.addPostings(p, []string{"anvil", fmt.Sprintf("w%dq", p)})
	}
	if len(x.post) != words+1 {
		t.Fatalf("%d keys indexed, want %d", len(x.post), words+1)
	}
	for p := range int32(words) {
		k := termKey(fmt.Sprintf("w%dq", p))
		ps := x.list(k).all()
		if len(ps) != 1 || ps[0].p != p {
			t.Fatalf("%s: postings %v, want item %d alone", k, ps, p)
		}
	}
	if n := x.list(termKey("anvil")).len(); n != words {
		t.Fatalf("anvil: %d postings, want %d", n, words)
	}
	room := 0
	for _, b := range x.lists {
		room += cap(b)
	}
	if room > len(x.post)+listBlock {
		t.Errorf("the lists keep room for %d for %d keys, more than one block more", room, len(x.post))
	}
}
