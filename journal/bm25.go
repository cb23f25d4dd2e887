package journal

import (
	"encoding/binary"
	"math"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"

	"github.com/npcd/npcd/llm"
)

// The retriever's keyword channel is BM25 computed in Go over the NPC's
// in-memory index, with statistics (document frequencies, average length)
// of that NPC alone. A search therefore touches only the NPC's own rows and
// its ranking does not change when another NPC's life grows; its cost
// follows the postings of the query's terms in that NPC's index, never the
// size of the database. Store.Search, the plain keyword search that keeps
// no index in memory, ranks with the same scorer (see keyword.go).

// BM25 parameters: k1 is FTS5's default; bm25B is FTS5's default length
// normalization, which the retriever lowers (WithLengthNorm).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// posting is one item containing a term, with how often it does, as a
// postCursor reads it from a postList.
type posting struct {
	p  int32
	tf uint16
}

// postList is one term's postings, oldest item first, delta-coded: per
// posting, uvarint(gap<<1 | more), where gap is the item's position less
// the one after the previous posting's (the first's is its position) and
// more says that uvarint(tf-2) follows (a word once in its item, the most
// common case, takes no byte for it). A posting takes one to three bytes,
// where a posting struct takes eight: with the sentence vectors, the
// postings are most of what an index keeps of a row once its vector is
// released (see trimVectors).
type postList struct {
	b []byte
	// n is the number of postings, with ownFamily set when the term is
	// the only key of its family known to npcIndex.family and that
	// family's key is the term's own (see npcIndex.familyOf).
	n    uint32
	next int32 // the position after the last posting's: the next gap's origin
}

// ownFamily marks, in postList.n, a term alone in a family keyed by the
// term itself: most words, whose family is their own key, are kept out of
// npcIndex.family, which costs some 130 bytes a family.
const ownFamily = 1 << 31

// len is how many postings l holds; 0 for a nil list.
func (l *postList) len() int {
	if l == nil {
		return 0
	}
	return int(l.n &^ ownFamily)
}

// add appends item p, holding the term tf times; p is past every
// posting's.
func (l *postList) add(p int32, tf int) {
	gap := uint64(p-l.next) << 1
	if tf > 1 {
		l.b = binary.AppendUvarint(l.b, gap|1)
		l.b = binary.AppendUvarint(l.b, uint64(min(tf, math.MaxUint16)-2))
	} else {
		l.b = binary.AppendUvarint(l.b, gap)
	}
	l.n++
	l.next = p + 1
}

// postCursor reads a postList's postings in order.
type postCursor struct {
	b    []byte
	at   int
	next int32
}

// cursor returns a cursor at l's first posting.
func (l *postList) cursor() postCursor { return postCursor{b: l.b} }

// more reports whether a posting is left to read.
func (c *postCursor) more() bool { return c.at < len(c.b) }

// read returns the next posting; more must have said there is one.
// (keywordInto reads the common posting itself: see short.)
func (c *postCursor) read() posting {
	v := uint64(c.b[c.at])
	if v < 0x80 {
		c.at++
	} else {
		var n int
		v, n = binary.Uvarint(c.b[c.at:])
		c.at += n
	}
	pt := posting{p: c.next + int32(v>>1), tf: 1}
	if v&1 != 0 {
		tf, n := binary.Uvarint(c.b[c.at:])
		c.at += n
		pt.tf = uint16(tf + 2)
	}
	c.next = pt.p + 1
	return pt
}

// short reads the next posting when it is the common one, of one byte:
// a word once in its item, a gap under 64. It is small enough to be
// inlined in keywordInto's loop, where read is not.
func (c *postCursor) short() (posting, bool) {
	v := c.b[c.at]
	if v&0x81 != 0 {
		return posting{}, false
	}
	c.at++
	c.next += int32(v>>1) + 1
	return posting{p: c.next - 1, tf: 1}, true
}

// postMark is where posting i·postSkip of a list starts: its byte offset
// and the origin of its gap.
type postMark struct{ off, next int32 }

// postSkip is how many postings apart a long list's marks are (see
// npcIndex.marks): a bounded search skips to the one before its first
// posting and reads fewer than postSkip postings before it.
const postSkip = 64

// list returns the list of key k in x, nil when no item holds k. It stays
// valid until a new key is indexed (addPostings).
func (x *npcIndex) list(k string) *postList {
	n, ok := x.post[k]
	if !ok {
		return nil
	}
	return x.listAt(n)
}

// listBlock is how many lists one block of npcIndex.lists holds once the
// index has outgrown its first block.
const listBlock = 256

// listAt returns list number n, valid until a new key is indexed.
func (x *npcIndex) listAt(n int32) *postList {
	return &x.lists[n/listBlock][n%listBlock]
}

// newList adds an empty list and returns its number. The lists sit in
// blocks of listBlock, each grown by doubling up to it, so that the room
// an index keeps to grow is at most part of one block, where one array
// grown by doubling kept a quarter of its lists' worth on average.
func (x *npcIndex) newList() int32 {
	last := len(x.lists) - 1
	if last < 0 || len(x.lists[last]) == listBlock {
		x.lists = append(x.lists, make([]postList, 0, 4))
		last++
	}
	x.lists[last] = append(x.lists[last], postList{})
	return int32(last*listBlock + len(x.lists[last]) - 1)
}

// from returns a cursor at posting i of list number n in x: through the
// list's marks, reading at most postSkip-1 postings to get there.
func (x *npcIndex) from(n int32, i int) postCursor {
	c := x.listAt(n).cursor()
	if m := i / postSkip; m > 0 {
		mk := x.marks[n][m-1]
		c.at, c.next = int(mk.off), mk.next
		i -= m * postSkip
	}
	for ; i > 0; i-- {
		if _, ok := c.short(); !ok {
			c.read()
		}
	}
	return c
}

// termKey is the form under which a word is indexed and looked up: its
// light stem (llm.Stem) without diacritics, so "swords" finds "sword" and
// "cafe" finds "café".
func termKey(w string) string {
	return llm.Stem(fold(w))
}

var foldChain = transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)

// fold removes diacritics from w; ASCII words are returned as they are.
func fold(w string) string {
	ascii := true
	for i := 0; i < len(w); i++ {
		if w[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return w
	}
	out, _, err := transform.String(foldChain, w)
	if err != nil {
		return w
	}
	return out
}

// familyKey is the Porter (Snowball) stem of a word: the key of its
// morphological family. The light stem of termKey keeps "adoption"
// and "adopt", "education" and "educate" apart, which is right for ranking a text by its
// own words; the family joins them, so a query can reach the words of the
// same root at a lower weight (see WithExpansion). Snowball keeps agent
// nouns apart ("painter" is not "paint"), which keeps the family narrow.
// The stemmer is github.com/kljensen/snowball's English (Porter2) one: the
// algorithm's published rules, tested against its reference vocabulary,
// which a hand-written stemmer would have to reproduce.
func familyKey(w string) string {
	return english.Stem(fold(w), false)
}

// indexTerms counts the indexed words of a text (its ftsWords) by key and returns the
// text's length in words (what BM25 normalizes by), and one word as written
// for each key. Stop words and words of one letter count toward the length
// but are not indexed, as Terms drops them from queries.
func indexTerms(words []string) (counts map[string]int, surface map[string]string, n int) {
	counts = make(map[string]int, len(words))
	surface = make(map[string]string, len(words))
	for _, w := range words {
		if !searchable(w) {
			continue
		}
		k := termKey(w)
		if counts[k] == 0 {
			surface[k] = w
		}
		counts[k]++
	}
	return counts, surface, len(words)
}

// searchable reports whether a lowercase word is a search term (see Terms).
func searchable(w string) bool {
	if stopWords[w] {
		return false
	}
	if utf8.RuneCountInString(w) < 2 {
		return isIdeograph(w)
	}
	return true
}

// addPostings indexes the words (ftsWords) of item p, as indexTerms
// counts them, in the order the terms first appear. Its counting is
// indexTerms' without two maps made per item: the scratch is reused,
// from a pool shared by the indexes (kept by each, a long text's map would
// stay with its NPC's index).
func (x *npcIndex) addPostings(p int32, words []string) {
	sc := termScratch.Get().(*postingScratch)
	terms := sc.terms[:0]
	for _, w := range words {
		if !searchable(w) {
			continue
		}
		k := termKey(w)
		if i, ok := sc.at[k]; ok {
			terms[i].n++
			continue
		}
		sc.at[k] = int32(len(terms))
		terms = append(terms, termCount{key: k, surface: w, n: 1})
	}
	for _, t := range terms {
		li, ok := x.post[t.key]
		if !ok {
			// The key is a slice of the item's text: a copy of it is
			// kept, or the text would stay alive with the index. (A map
			// assignment stores its key again, so no later posting is
			// added through one.)
			key := strings.Clone(t.key)
			li = x.newList()
			x.post[key] = li
			x.joinFamily(familyKey(t.surface), key, x.listAt(li))
		}
		l := x.listAt(li)
		if n := l.len(); n > 0 && n%postSkip == 0 {
			x.marks[li] = append(x.marks[li], postMark{off: int32(len(l.b)), next: l.next})
			x.markCount++
		}
		room := cap(l.b)
		l.add(p, t.n)
		x.postingRoom += cap(l.b) - room
	}
	clear(sc.at)
	clear(terms) // keeps no strings alive
	sc.terms = terms[:0]
	termScratch.Put(sc)
	x.dl = append(x.dl, uint32(len(words)))
	x.totalLen += int64(len(words))
}

// postingScratch is addPostings' scratch, empty between calls.
type postingScratch struct {
	terms []termCount
	at    map[string]int32 // index in terms of each key
}

var termScratch = sync.Pool{New: func() any { return &postingScratch{at: map[string]int32{}} }}

// termCount is one indexed term of an item being added: its key, the word
// as first written, and how often it occurs.
type termCount struct {
	key, surface string
	n            int
}

// joinFamily adds the new key, of list l, to family f. A key that is its
// own family's, first of it, is only marked (ownFamily); the family is
// listed in x.family once it has another key, in the order they came.
func (x *npcIndex) joinFamily(f, key string, l *postList) {
	fam := x.family[f]
	if len(fam) == 0 && key == f {
		l.n |= ownFamily
		return
	}
	// f is kept as the map's key (stored again at every assignment) and
	// maybe in the list: a copy, as a short word is its own family's key,
	// a slice of its text.
	if key == f {
		f = key
	} else {
		f = strings.Clone(f)
	}
	if len(fam) == 0 {
		if own := x.list(f); own != nil && own.n&ownFamily != 0 {
			own.n &^= ownFamily
			fam = append(fam, f)
		}
	}
	x.family[f] = append(fam, key)
}

// familyOf returns the keys of family f in x, in the order they came:
// those x.family lists, or else f alone when it is a key of its own
// family (own).
func (x *npcIndex) familyOf(f string) (listed []string, own bool) {
	if fam := x.family[f]; len(fam) > 0 {
		return fam, false
	}
	l := x.list(f)
	return nil, l != nil && l.n&ownFamily != 0
}

// df is how many of the NPC's items contain the word w.
func (x *npcIndex) df(w string) int { return x.list(termKey(w)).len() }

// queryKeys returns the index keys a query's terms look up, each with its
// weight: the terms' own keys at 1, and, when expand > 0, the other keys of
// the NPC's index in the same morphological family (familyKey) at expand,
// so "adopt" finds "adoption" below a text that says "adopt".
func (x *npcIndex) queryKeys(terms []string, expand float64) (keys []string, weights []float64) {
	seen := make(map[string]bool, len(terms))
	for _, t := range terms {
		if k := termKey(t); !seen[k] {
			seen[k] = true
			keys, weights = append(keys, k), append(weights, 1)
		}
	}
	if expand <= 0 {
		return keys, weights
	}
	for _, t := range terms {
		f := familyKey(t)
		listed, own := x.familyOf(f)
		if own {
			listed = []string{f}
		}
		for _, k := range listed {
			if !seen[k] {
				seen[k] = true
				keys, weights = append(keys, k), append(weights, expand)
			}
		}
	}
	return keys, weights
}

// keyword ranks the NPC's items by BM25 for the query's terms (and their
// family at weight expand, see queryKeys), with length normalization b, and
// returns at most limit of each kind, best first per kind. Only the
// postings of the looked-up keys are read.
func (x *npcIndex) keyword(terms []string, limit int, expand, b float64) []kwHit {
	return x.keywordInto(nil, terms, limit, expand, b)
}

// keywordInto is keyword returning the hits in dst's array when it has
// room for them.
func (x *npcIndex) keywordInto(dst []kwHit, terms []string, limit int, expand, b float64) []kwHit {
	n := len(x.items)
	if n == 0 || limit <= 0 || len(terms) == 0 {
		return nil
	}
	if cap(x.kwScores) < n {
		x.kwScores = make([]float32, n, n+n/4)
	}
	acc := x.kwScores[:n]
	touched := x.touched[:0]
	avgdl := float64(x.totalLen) / float64(n)
	if avgdl <= 0 {
		avgdl = 1
	}
	keys, weights := x.queryKeys(terms, expand)
	for i, k := range keys {
		li, ok := x.post[k]
		if !ok {
			continue
		}
		l := x.listAt(li)
		if l.len() == 0 {
			continue
		}
		d := float64(l.len())
		c := l.cursor()
		if x.bound > 0 && l.len() > x.bound {
			// A bounded search reads the most recent postings of a
			// frequent term: its IDF is low, and its cost would grow
			// with the NPC's life.
			c = x.from(li, l.len()-x.bound)
		}
		idf := weights[i] * math.Log(1+(float64(n)-d+0.5)/(d+0.5))
		for c.more() {
			e, ok := c.short()
			if !ok {
				e = c.read()
			}
			tf := float64(e.tf)
			norm := bm25K1 * (1 - b + b*float64(x.dl[e.p])/avgdl)
			if acc[e.p] == 0 {
				touched = append(touched, e.p)
			}
			acc[e.p] += float32(idf * tf * (bm25K1 + 1) / (tf + norm))
		}
	}
	tops := &x.kwTops
	for i := range tops {
		tops[i] = tops[i][:0]
	}
	// Newest first: postings run oldest to newest, and a tie goes to the
	// newer item, so in this order an equal score rarely displaces the
	// heap's top. The hits kept are the same in any order.
	for i := len(touched) - 1; i >= 0; i-- {
		p := touched[i]
		s := acc[p]
		acc[p] = 0
		it := x.items[p]
		h := &tops[it.kind]
		hit := kwHit{kind: it.kind, id: it.id, score: float64(s), p: p}
		if len(*h) < limit {
			*h = append(*h, hit)
			h.up(len(*h) - 1)
		} else if better(hit, (*h)[0]) {
			(*h)[0] = hit
			h.down(0)
		}
	}
	x.touched = touched[:0]
	out := dst[:0]
	if total := len(tops[0]) + len(tops[1]) + len(tops[2]); cap(out) >= total {
		out = out[:total]
	} else {
		out = make([]kwHit, total)
	}
	at := 0
	for i := range tops {
		// Popped worst first, into place from the end of the kind's run.
		h := tops[i]
		at += len(h)
		for j := at - 1; len(h) > 0; j-- {
			out[j] = h[0]
			last := len(h) - 1
			h[0] = h[last]
			h = h[:last]
			h.down(0)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// better orders hits by score, then newest first, so equal scores rank the
// same way every time.
func better(a, b kwHit) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.id > b.id
}

// hitHeap is a min-heap of hits: the worst on top, to be replaced.
type hitHeap []kwHit

// up and down move the hit at j (i) through a hole instead of swapping it
// at each level: one write per level, and the order is that of swapping.
func (h hitHeap) up(j int) {
	x := h[j]
	for j > 0 {
		i := (j - 1) / 2
		if !better(h[i], x) {
			break
		}
		h[j] = h[i]
		j = i
	}
	h[j] = x
}

func (h hitHeap) down(i int) {
	n := len(h)
	if i >= n {
		return
	}
	x := h[i]
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if j2 := j + 1; j2 < n && better(h[j], h[j2]) {
			j = j2
		}
		if !better(x, h[j]) {
			break
		}
		h[i] = h[j]
		i = j
	}
	h[i] = x
}
