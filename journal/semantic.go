package journal

import (
	"math"

	"github.com/npcd/npcd/internal/int8vec"
	"github.com/npcd/npcd/internal/wordvec"
	"github.com/npcd/npcd/llm"
)

// The semantic channel compares meanings of words, not their forms: each
// item's text gets a sentence vector once a search needs it (the
// weighted mean of the offline word vectors of its words, package
// wordvec), kept as int8 beside the item, and a search compares the
// query's sentence vector with all of them. "my kids love the outdoors"
// then comes near "we took the children camping", which share no word.
// Word vectors know topics rather than synonyms, so the channel is a weak
// signal beside BM25 (WithSemantic), and it knows English words only.

// semFloor is the cosine of two sentence vectors below which their texts
// are taken to be unrelated: the mean of a handful of word vectors keeps
// some similarity with any other such mean. Above it, similarity is
// rescaled to [0, 1].
const semFloor = 0.2

// semWords returns the vocabulary numbers of the words of text the table
// knows, by their form or else their light stem ("painted" → "paint"),
// stop words left out.
func semWords(t *wordvec.Table, words []string) []int32 {
	var ids []int32
	for _, w := range words {
		if !searchable(w) {
			continue
		}
		id, ok := t.ID(w)
		if !ok {
			if f := fold(w); f != w {
				id, ok = t.ID(f)
			}
		}
		if !ok {
			id, ok = t.ID(llm.Stem(fold(w)))
		}
		if ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// semVector writes into v (zeroed, Dims long) the sentence vector of the
// words ids: each word's unit vector weighted by its SIF weight times
// weight(id) (1 when weight is nil). It reports false when nothing was
// added.
func semVector(t *wordvec.Table, v []float32, ids []int32, weight func(int32) float64) bool {
	clear(v)
	added := false
	for _, id := range ids {
		w := float64(t.Weight(id))
		if weight != nil {
			w *= weight(id)
		}
		if w <= 0 {
			continue
		}
		t.AddTo(v, id, float32(w))
		added = true
	}
	return added
}

// quantize stores v as int8 codes in dst and returns the factor that turns
// the codes' dot product with another unit vector's codes into a cosine
// contribution: 1/(length of codes). 0 when v is zero. A NaN or an
// infinity in v, which no cosine can be computed with, gets the code 0.
func quantize(dst []int8, v []float32) float32 {
	m := float32(0)
	for _, x := range v {
		if a := float32(math.Abs(float64(x))); a > m && x-x == 0 {
			m = a
		}
	}
	if m == 0 {
		clear(dst)
		return 0
	}
	var s int64
	k := 127 / m
	for i, x := range v {
		c := int8(0)
		if x-x == 0 {
			c = round127(float64(x * k))
		}
		dst[i] = c
		s += int64(c) * int64(c)
	}
	return float32(1 / math.Sqrt(float64(s)))
}

// round127 is math.Round(y) as an int8, for y in [-127, 127] that came from
// a float32: y+0.5 is then exact in float64, so truncating it rounds half
// away from zero as math.Round does, without its call.
func round127(y float64) int8 {
	if y >= 0 {
		return int8(y + 0.5)
	}
	return -int8(-y + 0.5)
}

// ensureSemantic computes the sentence vectors of the items still
// without one (semText), so that every item has its vector.
func (x *npcIndex) ensureSemantic() {
	n := len(x.items)
	if x.wv == nil || len(x.semText) == 0 && len(x.semScale) == n {
		return
	}
	t := x.wv
	d := t.Dims()
	if len(x.semScale) < n {
		if x.sem.dims != d {
			x.sem.reset(d)
		}
		x.sem.grow(n - x.sem.len())
		x.semScale = append(x.semScale, make([]float32, n-len(x.semScale))...)
	}
	if cap(x.semTmp) < d {
		x.semTmp = make([]float32, d)
	}
	v := x.semTmp[:d]
	for p, text := range x.semText {
		x.semScale[p] = 0
		ids := semWords(t, ftsWords(text))
		if len(ids) == 0 || !semVector(t, v, ids, nil) {
			clear(x.sem.row(int(p)))
			continue
		}
		x.semScale[p] = quantize(x.sem.row(int(p)), v)
	}
	clear(x.semText)
	x.semText, x.semTextMost = drained(x.semText, x.semTextMost)
}

// semQuery returns the codes and scale of the query's sentence vector, its
// words weighted also by their rarity among the NPC's items (BM25's IDF,
// what the item vectors cannot know); a nil slice when the table knows
// none of the query's words.
func (x *npcIndex) semQuery(terms []string) ([]int8, float32) {
	t := x.wv
	ids := semWords(t, terms)
	if len(ids) == 0 {
		return nil, 0
	}
	// The sentence vector is only a step to the codes: its array is kept
	// for the next query.
	rs := x.scratch()
	if cap(rs.semV) < t.Dims() {
		rs.semV = make([]float32, t.Dims())
	}
	v := rs.semV[:t.Dims()]
	if !semVector(t, v, ids, func(id int32) float64 { return x.idf(t.Word(id)) }) {
		return nil, 0
	}
	q := make([]int8, t.Dims())
	s := quantize(q, v)
	if s == 0 {
		return nil, 0
	}
	return q, s
}

// scanSemantic computes, into x.semScores, each item's semantic similarity
// with the query's codes q: the cosine of the two sentence vectors, above
// semFloor rescaled to [0, 1], 0 below it.
func (x *npcIndex) scanSemantic(q []int8, qs float32) {
	n := len(x.items)
	if cap(x.semScores) < n {
		x.semScores = make([]float32, n, n+n/4)
	}
	x.semScores = x.semScores[:n]
	x.semQ, x.semQS = q, qs
	if q == nil || x.wv == nil {
		clear(x.semScores)
		return
	}
	x.ensureSemantic()
	d := len(q)
	start := x.scanStart()
	parallel(n-start, (n-start)*d, func(lo, hi int) {
		var dots [blockRows]int32
		for i := start + lo; i < start+hi; {
			k := dotRun(&x.sem, q, i, start+hi, &dots)
			scores, scales := x.semScores[i:i+k], x.semScale[i:i+k]
			for j, dot := range dots[:k] {
				c := float32(dot) * scales[j] * qs
				scores[j] = max(0, (c-semFloor)/(1-semFloor))
			}
			i += k
		}
	})
}

// dot8 is the inner product of two int8 vectors of equal length, with
// vector instructions where the machine has them (package int8vec).
func dot8(a, b []int8) int32 { return int8vec.Dot(a, b) }

// semAt is item p's semantic similarity with the query of the last
// semantic scan, computed when p lies before what the scan covered.
func (x *npcIndex) semAt(p int32) float32 {
	if int(p) >= x.scanStart() {
		return x.semScores[p]
	}
	if x.semQ == nil {
		return 0
	}
	s := x.semScale[p]
	if s == 0 {
		return 0
	}
	c := float32(dot8(x.semQ, x.sem.row(int(p)))) * s * x.semQS
	return max(0, (c-semFloor)/(1-semFloor))
}
