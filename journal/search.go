package journal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
	"unsafe"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/freelist"
)

// Result kinds: what a search result is.
const (
	KindMemory  = "memory"
	KindJournal = "journal"
	KindMessage = "message"
)

// Score parts reported in Result.Parts.
const (
	PartVector     = "vector"     // cosine similarity with the query, ≥ 0
	PartKeyword    = "keyword"    // BM25 normalized by the query's best match, in [0, 1]
	PartNeighbour  = "neighbour"  // relevance borrowed from neighbouring perceived messages
	PartRelevance  = "relevance"  // weighted vector + keyword + semantic (+ neighbour)
	PartRecency    = "recency"    // 0.5^(age/half-life) on the game's clock, in (0, 1]
	PartImportance = "importance" // importance/10
	PartSuperseded = "superseded" // 1 for a superseded memory, absent otherwise
	PartEntity     = "entity"     // relevance gained by being by or about someone the query names
	PartSemantic   = "semantic"   // similarity of meaning from offline word vectors, in [0, 1]
	PartSession    = "session"    // share of the score gained from the best matches of the same game day
)

// Result is one thing recalled by a search, with the sources that explain
// why it is known. Results that point at the same message or entry, or that
// say the same thing, are merged into one whose Sources cite them all.
type Result struct {
	Kind       string             `json:"kind"`
	ID         int64              `json:"id"`
	Content    string             `json:"content"`
	Score      float64            `json:"score"`
	Parts      map[string]float64 `json:"score_parts,omitempty"`
	Sources    character.Sources  `json:"sources"`
	GameTime   time.Time          `json:"game_time"`
	Importance int                `json:"importance"`
}

// candidate is an item being ranked.
type candidate struct {
	p     int32 // the item's position in the NPC's index (in rank only)
	kind  itemKind
	id    int64
	score float64
	parts scoreParts
}

// scoreParts are a candidate's score parts; a struct, not a map, because
// every candidate of every search has them and only the few results
// returned report them (as Result.Parts).
type scoreParts struct {
	vector, keyword, semantic, neighbour, entity, relevance, recency, importance, session float64
	// ranked is false for a keyword-only candidate, which reports only its
	// keyword part.
	ranked, superseded bool
}

// asMap returns the parts as reported in Result.Parts.
func (p scoreParts) asMap() map[string]float64 {
	if !p.ranked {
		return map[string]float64{PartKeyword: p.keyword}
	}
	m := map[string]float64{PartVector: p.vector, PartKeyword: p.keyword,
		PartRelevance: p.relevance, PartRecency: p.recency, PartImportance: p.importance}
	if p.semantic > 0 {
		m[PartSemantic] = p.semantic
	}
	if p.neighbour > 0 {
		m[PartNeighbour] = p.neighbour
	}
	if p.entity > 0 {
		m[PartEntity] = p.entity
	}
	if p.session > 0 {
		m[PartSession] = p.session
	}
	if p.superseded {
		m[PartSuperseded] = 1
	}
	return m
}

// Search returns up to k results for query from NPC npc's memories, journal
// and messages, best first. A query without a search term (empty, or only
// stop words) returns nothing; k is capped at MaxK. A failing embedder does
// not fail the search: it is logged and the search ranks by keyword alone.
// Returned memories get their access count and last access (on the game's
// clock) updated in batches (see Flush); a failure there is logged, not
// returned, since the memory was recalled either way.
func (r *Retriever) Search(ctx context.Context, npc, query string, k int) ([]Result, error) {
	return r.SearchWith(ctx, npc, query, k, SearchOptions{})
}

// SearchOptions trim the work of one search, for a caller that wants a
// quick hint more than the best recall: the tick's working context, which
// searches at every tick for what the NPC perceives, while the NPC can
// still search its whole memory itself (memory_search). The zero value
// is Search.
type SearchOptions struct {
	// NoFeedback skips pseudo-relevance feedback (WithFeedback), which
	// ranks the keyword channel a second time.
	NoFeedback bool
	// Window, when positive, bounds a search's work by its query rather
	// than by the NPC's whole life: each channel brings boundedPool
	// candidates per result asked for, not the Retriever's pool, and with a
	// lexical embedder the vector channel scans only for a query term the
	// NPC's rows do not hold, a number aside (vectorPoolNeeded), whatever
	// the number of items the NPC holds; once it holds more than Window
	// items, the vector and semantic channels also scan only the Window
	// most recent items (an older item still ranks when a keyword hit, its
	// neighbour or its replacement brings it), and a term held by more than
	// Window items is read only in the Window most recent of them (such a
	// term's IDF is low). So a young NPC's search does the work of an old
	// one's, on fewer items, instead of a whole Search's. It must not be
	// negative.
	Window int
	// NoParts leaves Result.Parts nil, for a caller that reads only the
	// results and their scores (the tick's working context).
	NoParts bool
	// Live is the NPC's live history as the caller holds it, as stored
	// (summaries first, then the other messages in the order of their
	// ids), or nil: a result showing one of its messages is made from it
	// instead of read from the database. The search only reads it. The
	// results are the same either way: a tick, which holds its NPC's
	// history, saves a read for each message it is shown of its own
	// context, which the rows its index keeps may no longer hold.
	Live []character.Message
	// Marks, when set, are the NPC's marks as the caller read them, at
	// one instant: when the NPC's index is up to date with them, the
	// search reads nothing from the database to find out (see Marks).
	Marks *Marks
}

// Marks tell how far an NPC's rows have come: its game clock, the
// revision of its history (character.State.HistoryRev), the revision of
// its memories (0 before the first) and its newest journal entry's id (0
// before the first). A search given the marks read with the NPC's state
// (character.Store.GlanceEvents) searches the NPC's rows as of that read.
type Marks struct {
	GameTime    time.Time
	HistoryRev  int64
	MemoryRev   int64
	NewestEntry int64
}

// SearchWith is Search with the work trimmed as o says.
func (r *Retriever) SearchWith(ctx context.Context, npc, query string, k int, o SearchOptions) ([]Result, error) {
	if o.Window < 0 {
		return nil, fmt.Errorf("%w: search window %d", ErrBadOption, o.Window)
	}
	terms := Terms(query)
	if len(terms) == 0 || k <= 0 {
		return nil, nil
	}
	k = min(k, MaxK)
	for attempt := 0; ; attempt++ {
		rs, err := r.search(ctx, npc, query, terms, k, o)
		if errors.Is(err, errReset) && attempt == 0 {
			r.forget(npc) // rows vanished under the index: rebuild it once
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("search memory of %q: %w", npc, err)
		}
		return rs, nil
	}
}

func (r *Retriever) search(ctx context.Context, npc, query string, terms []string, k int, o SearchOptions) ([]Result, error) {
	x, err := r.acquireAt(ctx, npc, o.Marks)
	if err != nil {
		return nil, err
	}
	defer r.release(x)
	// Deferred after release, so run before it: the scratch goes back
	// while the search still holds x.
	x.rs = r.scratch.get()
	defer func() { r.scratch.put(x.rs); x.rs = nil }()
	x.bound = o.Window
	defer func() { x.bound, x.qv, x.semQ, x.noVecPool = 0, nil, nil, false }()
	qv, err := r.queryVector(ctx, x, query)
	if errors.Is(err, ErrEmbedding) {
		r.log.Warn().Err(err).Str("npc", npc).Msg("vector search skipped")
		qv = nil
	} else if err != nil {
		return nil, err
	}
	if r.vectorPoolNeeded(x, terms) {
		x.scan(qv)
	} else {
		x.query(qv)
		x.noVecPool = true
	}
	if x.wv != nil {
		x.scanSemantic(x.semQuery(terms))
	}
	now := r.now(x)
	pool := max(r.cfg.pool, 4*k)
	if x.bounded() {
		pool = boundedPool * k
	}
	// The hits are read only during this search: their array is kept
	// for the next one.
	hits := x.keywordInto(x.rs.hits, terms, pool, r.cfg.wExpand, r.cfg.lengthNorm)
	if hits != nil {
		x.rs.hits = hits[:0]
	}
	named := x.named(terms)
	ranked := r.rank(x, qv != nil && !x.noVecPool, x.wv != nil, hits, pool, now, named)
	if r.cfg.wFeedback > 0 && !o.NoFeedback {
		more, err := r.feedbackTerms(ctx, x, ranked, terms, o.Live)
		if err != nil {
			return nil, err
		}
		if len(more) > 0 {
			hits = addHits(hits, x.keyword(more, pool, 0, r.cfg.lengthNorm), r.cfg.wFeedback)
			ranked = r.rank(x, qv != nil && !x.noVecPool, x.wv != nil, hits, pool, now, named)
		}
	}
	results, missing, err := r.store.collect(ctx, npc, ranked, k, terms, r.cfg.maxBytes, r.window(x), &x.rows, o.Live, !o.NoParts)
	if err != nil {
		return nil, err
	}
	if missing {
		return nil, errReset
	}
	for _, res := range results {
		if res.Kind == KindMemory {
			r.access.record(res.ID, now)
		}
	}
	if r.access.due(time.Now()) {
		if err := r.Flush(ctx); err != nil {
			r.log.Warn().Err(err).Str("npc", npc).Msg("memory access not recorded")
		}
	}
	return results, nil
}

// boundedPool is how many candidates per result a bounded search
// (SearchOptions.Window) takes from each channel, where an unbounded one
// takes the Retriever's pool (100). The best hundred of each channel are
// for a search that must find the one old line; a hint of a few lines
// needs the best few dozen.
const boundedPool = 4

// vectorPoolNeeded reports whether a search scans the vector channel for
// a pool of candidates of its own, or only scores the candidates the other
// channels bring (vecAt computes each one's cosine). A lexical embedder's
// vectors hold the query's words, stems and character trigrams: what its
// pool finds beyond the keyword channel are rows sharing a query word the
// NPC's rows never hold as such, a typo or an unknown inflection
// ("swordz" finds "sword"). So a bounded search (SearchOptions.Window),
// which wants a quick hint, scans for the pool only when the embedder
// gives meaning (a model's embeddings) or a query term other than a number
// is missing from the NPC's keyword index (or the keyword channel is off);
// an unbounded one, the NPC's own memory_search, always does.
func (r *Retriever) vectorPoolNeeded(x *npcIndex, terms []string) bool {
	if !x.bounded() || r.cfg.wKw <= 0 {
		return true
	}
	if _, lexical := r.embedder.(weightedEmbedder); !lexical {
		return true
	}
	for _, t := range terms {
		if x.list(termKey(t)).len() == 0 && !number(t) {
			return true
		}
	}
	return false
}

// number reports whether term is written in digits only: a number has no
// inflection, and one that differs from another by a digit is another
// number, not a typo of it, so the trigrams it shares with the numbers
// the NPC's rows hold find nothing worth a scan.
func number(term string) bool {
	for i := 0; i < len(term); i++ {
		if !isDigit(term[i]) {
			return false
		}
	}
	return term != ""
}

// window is how the search joins neighbouring perceived messages into one
// result (see WithWindow).
func (r *Retriever) window(x *npcIndex) window {
	if r.cfg.winParts < 2 {
		return window{}
	}
	return window{span: r.cfg.winSpan, parts: r.cfg.winParts, reach: r.cfg.winReach, rank: func(id int64) (int32, bool) {
		p, ok := x.position(kindMessage, id)
		if !ok {
			return 0, false
		}
		rank := x.userRank[p]
		return rank, rank >= 0
	}}
}

// weightedEmbedder embeds a text with per-word weights; the offline
// embedder is one.
type weightedEmbedder interface {
	WeightedVector(text string, weight func(word string) float64) []float32
	// AppendWeightedVector appends the vector to dst.
	AppendWeightedVector(dst []float32, text string, weight func(word string) float64) []float32
}

// queryVector embeds what waits for a vector and the query. A lexical
// embedder gets the query's words weighted by their rarity among the NPC's
// rows (BM25's IDF), which it cannot know by itself.
func (r *Retriever) queryVector(ctx context.Context, x *npcIndex, query string) ([]float32, error) {
	we, ok := r.embedder.(weightedEmbedder)
	if !ok {
		return r.embedPending(ctx, x, query, r.cfg.maxEmbed)
	}
	if _, err := r.embedPending(ctx, x, "", r.cfg.maxEmbed); err != nil {
		return nil, err
	}
	// The query vector lives in x's scratch: it serves only the search
	// holding x (search clears x.qv when it is over).
	qv := we.AppendWeightedVector(x.qbuf[:0], query, x.idf)
	x.qbuf = qv
	unit(qv)
	if x.dims > 0 && len(qv) != x.dims {
		return nil, fmt.Errorf("%w: query vector of %d dimensions, the index holds %d", ErrEmbedding, len(qv), x.dims)
	}
	return qv, nil
}

// rank scores the candidates of a search: the pool best by vector, the
// keyword hits, the neighbours of perceived messages among them and the
// replacements of superseded memories among them. A candidate by or about
// an entity in named (the actor of a perceived message, the entity of a
// memory) has its relevance raised: "what does Bob want" is answered by
// what Bob said, not by what others said to him. It returns them best
// first, in scratch memory of x that the next rank of x reuses.
//
// The candidates are kept as a sorted list of positions with a bitmap of
// the index's positions for membership, not as maps: a search of the
// working context ranks hundreds of candidates at every tick.
func (r *Retriever) rank(x *npcIndex, haveVec, haveSem bool, hits []kwHit, pool int, now time.Time, named map[int32]bool) []candidate {
	cfg := r.cfg
	rs := x.scratch()
	rs.reset(len(x.items))
	// BM25 is scaled by the best hit among the NPC's searchable rows.
	kw := rs.kw[:0]
	best := 0.0
	for _, h := range hits {
		// A hit's position is its row's: each row is one item (see add).
		if h.score > 0 {
			kw = append(kw, kwPos{h.p, h.score})
			best = math.Max(best, h.score)
		}
	}
	slices.SortFunc(kw, func(a, b kwPos) int { return cmp.Compare(a.p, b.p) })
	// One entry per position, holding its best hit.
	j := 0
	for i, e := range kw {
		if i > 0 && e.p == kw[j-1].p {
			kw[j-1].s = math.Max(kw[j-1].s, e.s)
			continue
		}
		kw[j] = e
		j++
	}
	kw = kw[:j]
	for i := range kw {
		kw[i].s /= best
	}
	rs.kw = kw
	if haveVec {
		rs.top = x.topNInto(rs.top[:0], x.scores, x.scanStart(), pool)
		for _, p := range rs.top {
			rs.add(p)
		}
	}
	if haveSem {
		rs.top = x.topNInto(rs.top[:0], x.semScores, x.scanStart(), pool)
		for _, p := range rs.top {
			rs.add(p)
		}
	}
	for _, e := range kw {
		rs.add(e.p)
	}
	slices.Sort(rs.set)
	sem := func(p int32) float64 {
		if !haveSem {
			return 0
		}
		return float64(x.semAt(p))
	}
	// channels returns item p's score in each channel, given its keyword
	// score kw. Cosine is used as is, not scaled to the query's best: a
	// query that resembles nothing should not make its nearest row look
	// like a match.
	channels := func(p int32, kw float64) scoreParts {
		return scoreParts{vector: math.Max(0, float64(x.vecAt(p))), keyword: kw, semantic: sem(p), ranked: true}
	}
	relevance := func(c scoreParts) float64 {
		return cfg.wVec*c.vector + cfg.wKw*c.keyword + cfg.wSem*c.semantic
	}
	if cfg.wNeighbour > 0 {
		// The neighbours of the matches found, not of neighbours added
		// meanwhile.
		for _, p := range rs.set[:len(rs.set)] {
			prev, next := x.neighbours(p)
			if prev >= 0 {
				rs.add(prev)
			}
			if next >= 0 {
				rs.add(next)
			}
		}
	}
	// A superseded memory brings the memories that replaced it along, so
	// each can be ranked above its predecessor even when the query misses
	// it.
	succ := rs.succ[:0]
	for _, p := range rs.set {
		for q, hops := p, 0; x.items[q].kind == kindMemory && x.items[q].supBy != 0 && hops < 64; hops++ {
			next, ok := x.position(kindMemory, x.items[q].supBy)
			if !ok {
				break
			}
			if !bitSet(rs.hasSucc, q) {
				setBit(rs.hasSucc, q)
				succ = append(succ, [2]int32{q, next})
			}
			q = next
		}
	}
	rs.succ = succ
	for _, e := range succ {
		rs.add(e[0])
		rs.add(e[1])
	}
	// In position order, so that ties (the session pass's best matches,
	// the final order) fall the same way in every run.
	slices.Sort(rs.set)
	set := rs.set
	at := func(p int32) int {
		i, _ := slices.BinarySearch(set, p)
		return i
	}
	// Each candidate's own channels and relevance first: a candidate's
	// neighbour is often a candidate too, and its relevance is then read,
	// not computed again.
	cands := slices.Grow(rs.cands[:0], len(set))[:len(set)]
	rels := slices.Grow(rs.rel[:0], len(set))[:len(set)]
	k := 0 // kw and set are both in position order
	for i, p := range set {
		it := &x.items[p]
		for k < len(kw) && kw[k].p < p {
			k++
		}
		kwp := 0.0
		if k < len(kw) && kw[k].p == p {
			kwp = kw[k].s
		}
		parts := channels(p, kwp)
		cands[i] = candidate{p: p, kind: it.kind, id: it.id, parts: parts}
		rels[i] = relevance(parts)
	}
	// Every keyword hit is a candidate: an item that is not has keyword
	// score 0.
	relOf := func(q int32) float64 {
		if bitSet(rs.inSet, q) {
			return rels[at(q)]
		}
		return relevance(channels(q, 0))
	}
	halfLife := cfg.halfLife.Seconds()
	nowSec := now.Unix()
	for i, p := range set {
		it := &x.items[p]
		c := &cands[i]
		parts := c.parts
		rel := rels[i]
		if cfg.wNeighbour > 0 {
			nb := 0.0
			prev, next := x.neighbours(p)
			if prev >= 0 {
				nb = math.Max(nb, cfg.wNeighbour*relOf(prev))
			}
			if next >= 0 {
				nb = math.Max(nb, cfg.wNeighbour*relOf(next))
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
		c.score, c.parts = s, parts
	}
	rs.cands, rs.rel = cands, rels
	x.sessionContext(cands, cfg.wSession)
	// Every superseded memory ends strictly below the memory that replaced
	// it, whatever the query; one whose replacement scores nothing scores
	// nothing.
	if len(succ) > 0 {
		next := slices.Grow(rs.next[:0], len(set))[:len(set)]
		for i := range next {
			next[i] = -1
		}
		for _, e := range succ {
			next[at(e[0])] = int32(at(e[1]))
		}
		done := slices.Grow(rs.done[:0], len(set))[:len(set)]
		clear(done)
		for i := range next {
			if next[i] >= 0 {
				below(cands, next, done, i)
			}
		}
		rs.next, rs.done = next, done
	}
	// Sorted through small keys, then copied in order: a candidate is a
	// hundred bytes, too many to move around in the sort.
	keys := rs.keys[:0]
	for i, c := range cands {
		if c.score > 0 {
			keys = append(keys, candKey{score: c.score, id: c.id, kind: c.kind, i: int32(i)})
		}
	}
	slices.SortFunc(keys, compareCandKeys)
	out := slices.Grow(rs.sorted[:0], len(keys))
	for _, k := range keys {
		out = append(out, cands[k.i])
	}
	rs.keys, rs.sorted = keys, out
	return out
}

// candKey is what sortCandidates orders a candidate by, and where the
// candidate is.
type candKey struct {
	score float64
	id    int64
	kind  itemKind
	i     int32
}

// compareCandKeys is the order of sortCandidates.
func compareCandKeys(a, b candKey) int {
	if a.score != b.score {
		if a.score > b.score {
			return -1
		}
		return 1
	}
	if a.kind != b.kind {
		return cmp.Compare(a.kind, b.kind)
	}
	return -cmp.Compare(a.id, b.id)
}

// below puts candidate i strictly below the candidate that replaced it
// (next[i], -1 for none), after putting that one below its own
// replacement, and returns its score.
func below(cands []candidate, next []int32, done []bool, i int) float64 {
	c := &cands[i]
	q := next[i]
	if q < 0 || done[i] {
		return c.score
	}
	done[i] = true
	if rs := below(cands, next, done, int(q)); c.score >= rs {
		c.score = max(0, math.Nextafter(rs, math.Inf(-1)))
	}
	return c.score
}

// neighbours returns the perceived messages before and after item p (-1
// when there is none, or when p is no perceived message).
func (x *npcIndex) neighbours(p int32) (prev, next int32) {
	prev, next = -1, -1
	rank := int(x.userRank[p])
	if rank < 0 {
		return
	}
	if rank > 0 {
		prev = x.users[rank-1]
	}
	if rank+1 < len(x.users) {
		next = x.users[rank+1]
	}
	return
}

// kwPos is an item's keyword score in rank.
type kwPos struct {
	p int32
	s float64
}

// scratchList keeps the rank scratch of the searches that ended, at most
// maxFreeScratch of them, for the next ones. A search borrows one for its
// length (npcIndex.rs), so a world of many NPCs holds about as many as
// search at once, not one per NPC: with a thousand NPCs, one each held
// some 30 MB.
type scratchList struct {
	freelist.List[*rankScratch]
}

// maxFreeScratch bounds scratchList: more than the searches a daemon runs
// at once on a few cores (a batch tick runs up to 32 ticks at once; a
// scratch is made again when none is free).
const maxFreeScratch = 32

// maxScratchBytes is the largest scratch scratchList keeps.
const maxScratchBytes = 1 << 20

// scratch returns the rank scratch x works in: the one its search borrowed,
// or, for a caller outside a search, one of its own, made once.
func (x *npcIndex) scratch() *rankScratch {
	if x.rs == nil {
		x.rs = &rankScratch{}
	}
	return x.rs
}

// get returns a free scratch, or a new one.
func (l *scratchList) get() *rankScratch {
	if rs, ok := l.Get(); ok {
		return rs
	}
	return &rankScratch{}
}

// put keeps rs for the next search, unless maxFreeScratch are kept or rs
// grew past maxScratchBytes (the search of an NPC of millions of rows).
func (l *scratchList) put(rs *rankScratch) {
	if rs.bytes() <= maxScratchBytes {
		l.Put(rs, maxFreeScratch)
	}
}

// rankScratch is what rank works in, kept between searches (scratchList) so
// that a search allocates nothing that grows with its candidates: a bitmap
// of the index's positions for the candidates, and for the memories whose
// replacement is known; the candidates' positions, in order; the keyword
// scores by position; and the candidates themselves.
type rankScratch struct {
	inSet, hasSucc []uint64
	set            []int32
	kw             []kwPos
	succ           [][2]int32 // a memory's position and its replacement's
	top            []int32
	heap           []scored
	cands          []candidate
	rel            []float64
	next           []int32
	done           []bool
	keys           []candKey
	sorted         []candidate
	hits           []kwHit   // the keyword channel's hits of a search
	semV           []float32 // the semantic channel's query vector (semQuery)
}

// reset empties the scratch for an index of n items.
func (rs *rankScratch) reset(n int) {
	w := (n + 63) / 64
	if cap(rs.inSet) < w {
		rs.inSet = make([]uint64, w, w+w/4)
		rs.hasSucc = make([]uint64, w, w+w/4)
	}
	rs.inSet, rs.hasSucc = rs.inSet[:w], rs.hasSucc[:w]
	clear(rs.inSet)
	clear(rs.hasSucc)
	rs.set = rs.set[:0]
}

// add makes item p a candidate.
func (rs *rankScratch) add(p int32) {
	if !bitSet(rs.inSet, p) {
		setBit(rs.inSet, p)
		rs.set = append(rs.set, p)
	}
}

// bytes is what the scratch holds.
func (rs *rankScratch) bytes() int64 {
	return int64(cap(rs.inSet)+cap(rs.hasSucc))*8 + int64(cap(rs.set)+cap(rs.top)+cap(rs.next))*4 + int64(cap(rs.kw))*16 +
		int64(cap(rs.succ))*8 + int64(cap(rs.heap))*8 + int64(cap(rs.cands)+cap(rs.sorted))*int64(unsafe.Sizeof(candidate{})) + int64(cap(rs.keys))*24 + int64(cap(rs.rel))*8 + int64(cap(rs.done)) +
		int64(cap(rs.hits))*int64(unsafe.Sizeof(kwHit{})) + int64(cap(rs.semV))*4
}

func bitSet(b []uint64, p int32) bool { return b[p>>6]&(1<<(p&63)) != 0 }
func setBit(b []uint64, p int32)      { b[p>>6] |= 1 << (p & 63) }

// sortCandidates orders by score, then newest first, so equal scores rank
// the same way every time.
func sortCandidates(cs []candidate) {
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
