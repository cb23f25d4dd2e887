package journal

import (
	"container/heap"
	"math"
	"unicode"
	"unicode/utf8"

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
// size of the database. (The FTS5 tables remain for Store.Search, the plain
// keyword search that needs no index in memory.)

// BM25 parameters, FTS5's defaults.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// posting is one item containing a term, with how often it does.
type posting struct {
	p  int32
	tf uint16
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

// indexTerms counts the indexed words of text by key and returns the
// text's length in words (what BM25 normalizes by). Stop words and words of
// one letter count toward the length but are not indexed, as Terms drops
// them from queries.
func indexTerms(text string) (map[string]int, int) {
	words := ftsWords(text)
	counts := make(map[string]int, len(words))
	for _, w := range words {
		if !searchable(w) {
			continue
		}
		counts[termKey(w)]++
	}
	return counts, len(words)
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

// addPostings indexes the words of item p.
func (x *npcIndex) addPostings(p int32, text string) {
	counts, n := indexTerms(text)
	for k, tf := range counts {
		x.post[k] = append(x.post[k], posting{p: p, tf: uint16(min(tf, math.MaxUint16))})
		x.postings++
	}
	x.dl = append(x.dl, uint32(n))
	x.totalLen += int64(n)
}

// df is how many of the NPC's items contain the word w.
func (x *npcIndex) df(w string) int { return len(x.post[termKey(w)]) }

// keyword ranks the NPC's items by BM25 for the query's terms and returns
// at most limit of each kind, best first per kind. Only the postings of the
// query's terms are read.
func (x *npcIndex) keyword(terms []string, limit int) []kwHit {
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
	seen := make(map[string]bool, len(terms))
	for _, t := range terms {
		k := termKey(t)
		if seen[k] {
			continue
		}
		seen[k] = true
		ps := x.post[k]
		if len(ps) == 0 {
			continue
		}
		d := float64(len(ps))
		idf := math.Log(1 + (float64(n)-d+0.5)/(d+0.5))
		for _, e := range ps {
			tf := float64(e.tf)
			norm := bm25K1 * (1 - bm25B + bm25B*float64(x.dl[e.p])/avgdl)
			if acc[e.p] == 0 {
				touched = append(touched, e.p)
			}
			acc[e.p] += float32(idf * tf * (bm25K1 + 1) / (tf + norm))
		}
	}
	var tops [3]hitHeap
	for _, p := range touched {
		s := acc[p]
		acc[p] = 0
		it := x.items[p]
		h := &tops[it.kind]
		hit := kwHit{kind: it.kind, id: it.id, score: float64(s)}
		if h.Len() < limit {
			heap.Push(h, hit)
		} else if better(hit, (*h)[0]) {
			(*h)[0] = hit
			heap.Fix(h, 0)
		}
	}
	x.touched = touched[:0]
	var out []kwHit
	for i := range tops {
		h := tops[i]
		start := len(out)
		for h.Len() > 0 {
			out = append(out, heap.Pop(&h).(kwHit))
		}
		// Popped worst first: reverse to best first.
		for a, b := start, len(out)-1; a < b; a, b = a+1, b-1 {
			out[a], out[b] = out[b], out[a]
		}
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

func (h hitHeap) Len() int           { return len(h) }
func (h hitHeap) Less(i, j int) bool { return better(h[j], h[i]) }
func (h hitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *hitHeap) Push(v any)        { *h = append(*h, v.(kwHit)) }
func (h *hitHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}
