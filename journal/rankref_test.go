package journal

// The reference implementation of the in-memory ranking of a search, as it
// was before its allocations and maps were taken out: rankpipe_test.go checks
// that the ranking returns exactly what this code returns, candidate for
// candidate and bit for bit.

import (
	"container/heap"
	"maps"
	"math"
	"slices"
	"sort"
	"time"
)

// refScan is npcIndex.scan: the cosine of q with each item's vector, both
// quantized (quantize), by the dense dot product of their codes.
func refScan(x *npcIndex, q []float32) {
	n := len(x.items)
	if cap(x.scores) < n {
		x.scores = make([]float32, n, n+n/4)
	}
	x.scores = x.scores[:n]
	x.qv, x.qc, x.qcs = q, nil, 0
	d := x.dims
	if q == nil || d == 0 || len(q) != d {
		clear(x.scores)
		return
	}
	x.qc = make([]int8, d)
	x.qcs = quantize(x.qc, q)
	if x.qcs == 0 {
		clear(x.scores)
		return
	}
	start := x.scanStart()
	for i := start; i < n; i++ {
		x.scores[i] = float32(dot8(x.qc, x.vecs.row(i))) * x.vecScale[i] * x.qcs
	}
}

// refVecAt is npcIndex.vecAt.
func refVecAt(x *npcIndex, p int32) float32 {
	if int(p) >= x.scanStart() {
		return x.scores[p]
	}
	if x.qv == nil || x.qcs == 0 {
		return 0
	}
	return float32(dot8(x.qc, x.vecs.row(int(p)))) * x.vecScale[p] * x.qcs
}

// refScanSemantic is npcIndex.scanSemantic.
func refScanSemantic(x *npcIndex, q []int8, qs float32) {
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
		for i := start + lo; i < start+hi; i++ {
			s := x.semScale[i]
			if s == 0 {
				x.semScores[i] = 0
				continue
			}
			c := float32(dot8(q, x.sem.row(i))) * s * qs
			x.semScores[i] = max(0, (c-semFloor)/(1-semFloor))
		}
	})
}

// refSemAt is npcIndex.semAt.
func refSemAt(x *npcIndex, p int32) float32 {
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

// refTopNFrom is topNFrom.
func refTopNFrom(scores []float32, lo, n int) []int32 {
	top := refTopN(scores[lo:], n)
	for i := range top {
		top[i] += int32(lo)
	}
	return top
}

// refTopN is topN.
func refTopN(scores []float32, n int) []int32 {
	h := &refMinHeap{}
	for i, s := range scores {
		if s <= 0 {
			continue
		}
		if h.Len() < n {
			heap.Push(h, scored{int32(i), s})
		} else if s > (*h)[0].s {
			(*h)[0] = scored{int32(i), s}
			heap.Fix(h, 0)
		}
	}
	out := make([]int32, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(scored).p
	}
	return out
}

type refMinHeap []scored

func (h refMinHeap) Len() int { return len(h) }
func (h refMinHeap) Less(i, j int) bool {
	if h[i].s != h[j].s {
		return h[i].s < h[j].s
	}
	return h[i].p < h[j].p
}
func (h refMinHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *refMinHeap) Push(v any)   { *h = append(*h, v.(scored)) }
func (h *refMinHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// refNamed is npcIndex.named.
func refNamed(x *npcIndex, terms []string) map[int32]bool {
	var out map[int32]bool
	for _, t := range terms {
		if id, ok := x.who[termKey(t)]; ok {
			if out == nil {
				out = map[int32]bool{}
			}
			out[id] = true
		}
	}
	return out
}

// refQueryKeys is npcIndex.queryKeys.
func refQueryKeys(x *npcIndex, terms []string, expand float64) (keys []string, weights []float64) {
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
		fam, own := x.familyOf(f)
		if own {
			fam = []string{f}
		}
		for _, k := range fam {
			if !seen[k] {
				seen[k] = true
				keys, weights = append(keys, k), append(weights, expand)
			}
		}
	}
	return keys, weights
}

// refKeyword is npcIndex.keyword.
func refKeyword(x *npcIndex, terms []string, limit int, expand, b float64) []kwHit {
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
	keys, weights := refQueryKeys(x, terms, expand)
	for i, k := range keys {
		ps := x.list(k).all()
		if len(ps) == 0 {
			continue
		}
		d := float64(len(ps))
		if x.bound > 0 && len(ps) > x.bound {
			ps = ps[len(ps)-x.bound:]
		}
		idf := weights[i] * math.Log(1+(float64(n)-d+0.5)/(d+0.5))
		for _, e := range ps {
			tf := float64(e.tf)
			norm := bm25K1 * (1 - b + b*float64(x.dl[e.p])/avgdl)
			if acc[e.p] == 0 {
				touched = append(touched, e.p)
			}
			acc[e.p] += float32(idf * tf * (bm25K1 + 1) / (tf + norm))
		}
	}
	var tops [3]refHitHeap
	for _, p := range touched {
		s := acc[p]
		acc[p] = 0
		it := x.items[p]
		h := &tops[it.kind]
		hit := kwHit{kind: it.kind, id: it.id, score: float64(s)}
		if h.Len() < limit {
			heap.Push(h, hit)
		} else if refBetter(hit, (*h)[0]) {
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
		for a, b := start, len(out)-1; a < b; a, b = a+1, b-1 {
			out[a], out[b] = out[b], out[a]
		}
	}
	return out
}

// refBetter is better.
func refBetter(a, b kwHit) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.id > b.id
}

type refHitHeap []kwHit

func (h refHitHeap) Len() int           { return len(h) }
func (h refHitHeap) Less(i, j int) bool { return refBetter(h[j], h[i]) }
func (h refHitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *refHitHeap) Push(v any)        { *h = append(*h, v.(kwHit)) }
func (h *refHitHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// refAddHits is addHits.
func refAddHits(a, b []kwHit, w float64) []kwHit {
	bestA, bestB := 0.0, 0.0
	for _, h := range a {
		bestA = math.Max(bestA, h.score)
	}
	for _, h := range b {
		bestB = math.Max(bestB, h.score)
	}
	if bestA <= 0 || bestB <= 0 || w <= 0 {
		return a
	}
	out := append(make([]kwHit, 0, len(a)+len(b)), a...)
	at := make(map[itemKey]int, len(a))
	for i, h := range out {
		at[itemKey{h.kind, h.id}] = i
	}
	for _, h := range b {
		s := w * bestA * h.score / bestB
		if i, ok := at[itemKey{h.kind, h.id}]; ok {
			out[i].score += s
		} else {
			out = append(out, kwHit{kind: h.kind, id: h.id, score: s})
		}
	}
	return out
}

// refSessionContext is npcIndex.sessionContext.
func refSessionContext(x *npcIndex, cs []candidate, w float64) {
	if w <= 0 || len(cs) < 2 {
		return
	}
	var top [sessionTop]int
	n := 0
	for i, c := range cs {
		if c.score <= 0 || c.kind != kindMessage || !x.items[c.p].user {
			continue
		}
		j := n
		if n < sessionTop {
			n++
		} else if c.score <= cs[top[n-1]].score {
			continue
		} else {
			j = n - 1
		}
		for ; j > 0 && cs[top[j-1]].score < c.score; j-- {
			top[j] = top[j-1]
		}
		top[j] = i
	}
	if n < 2 {
		return
	}
	mass := make(map[int64]float64, n)
	total := 0.0
	for _, i := range top[:n] {
		c := cs[i]
		mass[gameDay(x.items[c.p].gameTime)] += c.score
		total += c.score
	}
	for i := range cs {
		c := &cs[i]
		if c.score <= 0 {
			continue
		}
		share := mass[gameDay(x.items[c.p].gameTime)] / total
		if share <= 0 {
			continue
		}
		c.parts.session = w * share
		c.score *= 1 + w*share
	}
}

// refRank is Retriever.rank.
func refRank(r *Retriever, x *npcIndex, haveVec, haveSem bool, hits []kwHit, pool int, now time.Time, named map[int32]bool) []candidate {
	cfg := r.cfg
	kw := make(map[int32]float64, len(hits))
	best := 0.0
	for _, h := range hits {
		if p, ok := x.position(h.kind, h.id); ok && h.score > 0 {
			kw[p] = math.Max(kw[p], h.score)
			best = math.Max(best, h.score)
		}
	}
	for p := range kw {
		kw[p] /= best
	}
	set := make(map[int32]bool, len(kw)+pool)
	if haveVec {
		for _, p := range refTopNFrom(x.scores, x.scanStart(), pool) {
			set[p] = true
		}
	}
	if haveSem {
		for _, p := range refTopNFrom(x.semScores, x.scanStart(), pool) {
			set[p] = true
		}
	}
	for p := range kw {
		set[p] = true
	}
	sem := func(p int32) float64 {
		if !haveSem {
			return 0
		}
		return float64(refSemAt(x, p))
	}
	channels := func(p int32) scoreParts {
		return scoreParts{vector: math.Max(0, float64(refVecAt(x, p))), keyword: kw[p], semantic: sem(p), ranked: true}
	}
	relevance := func(c scoreParts) float64 {
		return cfg.wVec*c.vector + cfg.wKw*c.keyword + cfg.wSem*c.semantic
	}
	neighbours := func(p int32) (prev, next int32) {
		prev, next = -1, -1
		rank := x.userRank[p]
		if rank < 0 {
			return
		}
		if rank > 0 {
			prev = x.users[rank-1]
		}
		if int(rank)+1 < len(x.users) {
			next = x.users[rank+1]
		}
		return
	}
	if cfg.wNeighbour > 0 {
		for _, p := range slices.Sorted(maps.Keys(set)) {
			prev, next := neighbours(p)
			for _, q := range []int32{prev, next} {
				if q >= 0 {
					set[q] = true
				}
			}
		}
	}
	succ := map[int32]int32{}
	for p := range set {
		for q, hops := p, 0; x.items[q].kind == kindMemory && x.items[q].supBy != 0 && hops < 64; hops++ {
			next, ok := x.position(kindMemory, x.items[q].supBy)
			if !ok {
				break
			}
			succ[q] = next
			q = next
		}
	}
	for p, q := range succ {
		set[p], set[q] = true, true
	}
	halfLife := cfg.halfLife.Seconds()
	nowSec := now.Unix()
	cands := make([]candidate, 0, len(set))
	at := make(map[int32]int, len(set))
	for _, p := range slices.Sorted(maps.Keys(set)) {
		it := x.items[p]
		parts := channels(p)
		rel := relevance(parts)
		if cfg.wNeighbour > 0 {
			nb := 0.0
			prev, next := neighbours(p)
			if prev >= 0 {
				nb = math.Max(nb, cfg.wNeighbour*relevance(channels(prev)))
			}
			if next >= 0 {
				nb = math.Max(nb, cfg.wNeighbour*relevance(channels(next)))
			}
			if nb > 0 {
				parts.neighbour = nb
				rel += nb
			}
		}
		if cfg.wEntity > 0 && it.who != 0 && named[it.who] {
			parts.entity = cfg.wEntity * rel
			rel += cfg.wEntity * rel
		}
		age := float64(nowSec - it.gameTime)
		rec := 1.0
		if age > 0 {
			rec = math.Exp2(-age / halfLife)
		}
		imp := float64(it.imp) / 10
		s := rel * (1 - cfg.wRec - cfg.wImp + cfg.wRec*rec + cfg.wImp*imp)
		if rel < minRelevance {
			s = 0
		}
		parts.relevance, parts.recency, parts.importance = rel, rec, imp
		if it.supBy != 0 {
			s *= supersededFactor
			parts.superseded = true
		}
		at[p] = len(cands)
		cands = append(cands, candidate{p: p, kind: it.kind, id: it.id, score: s, parts: parts})
	}
	refSessionContext(x, cands, cfg.wSession)
	done := map[int32]bool{}
	var below func(p int32) float64
	below = func(p int32) float64 {
		c := &cands[at[p]]
		q, ok := succ[p]
		if !ok || done[p] {
			return c.score
		}
		done[p] = true
		if rs := below(q); c.score >= rs {
			c.score = max(0, math.Nextafter(rs, math.Inf(-1)))
		}
		return c.score
	}
	for p := range succ {
		below(p)
	}
	out := cands[:0]
	for _, c := range cands {
		if c.score > 0 {
			out = append(out, c)
		}
	}
	refSortCandidates(out)
	return out
}

// refSortCandidates is sortCandidates.
func refSortCandidates(cs []candidate) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].score != cs[j].score {
			return cs[i].score > cs[j].score
		}
		if cs[i].kind != cs[j].kind {
			return cs[i].kind < cs[j].kind
		}
		return cs[i].id > cs[j].id
	})
}
