package journal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/npcd/npcd/character"
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
	// than by the NPC's whole life: the vector and semantic channels scan
	// only the Window most recent items (an older item still ranks when a
	// keyword hit, its neighbour or its replacement brings it), and a term
	// held by more than Window items is read only in the Window most
	// recent of them (such a term's IDF is low). With fewer items than
	// Window, or rarer terms, the results are those of Search. It must
	// not be negative.
	Window int
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
	x, err := r.acquire(ctx, npc)
	if err != nil {
		return nil, err
	}
	defer r.release(x)
	x.bound = o.Window
	defer func() { x.bound, x.qv, x.semQ = 0, nil, nil }()
	qv, err := r.queryVector(ctx, x, query)
	if errors.Is(err, ErrEmbedding) {
		r.log.Warn().Err(err).Str("npc", npc).Msg("vector search skipped")
		qv = nil
	} else if err != nil {
		return nil, err
	}
	x.scan(qv)
	if x.wv != nil {
		x.scanSemantic(x.semQuery(terms))
	}
	now := r.now(x)
	pool := max(r.cfg.pool, 4*k)
	hits := x.keyword(terms, pool, r.cfg.wExpand, r.cfg.lengthNorm)
	named := x.named(terms)
	ranked := r.rank(x, qv != nil, x.wv != nil, hits, pool, now, named)
	if r.cfg.wFeedback > 0 && !o.NoFeedback {
		more, err := r.feedbackTerms(ctx, x, ranked, terms)
		if err != nil {
			return nil, err
		}
		if len(more) > 0 {
			hits = addHits(hits, x.keyword(more, pool, 0, r.cfg.lengthNorm), r.cfg.wFeedback)
			ranked = r.rank(x, qv != nil, x.wv != nil, hits, pool, now, named)
		}
	}
	results, missing, err := r.store.collect(ctx, npc, ranked, k, terms, r.cfg.maxBytes, r.window(x), &x.rows)
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

// window is how the search joins neighbouring perceived messages into one
// result (see WithWindow).
func (r *Retriever) window(x *npcIndex) window {
	if r.cfg.winParts < 2 {
		return window{}
	}
	return window{span: r.cfg.winSpan, parts: r.cfg.winParts, reach: r.cfg.winReach, rank: func(id int64) (int32, bool) {
		p, ok := x.pos[itemKey{kindMessage, id}]
		if !ok {
			return 0, false
		}
		rank, ok := x.userRank[p]
		return rank, ok
	}}
}

// weightedEmbedder embeds a text with per-word weights; the offline
// embedder is one.
type weightedEmbedder interface {
	WeightedVector(text string, weight func(word string) float64) []float32
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
	qv := we.WeightedVector(query, x.idf)
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
// first.
func (r *Retriever) rank(x *npcIndex, haveVec, haveSem bool, hits []kwHit, pool int, now time.Time, named map[int32]bool) []candidate {
	cfg := r.cfg
	// BM25 is scaled by the best hit among the NPC's searchable rows (a
	// summary or another NPC's row is no hit).
	kw := make(map[int32]float64, len(hits))
	best := 0.0
	for _, h := range hits {
		if p, ok := x.pos[itemKey{h.kind, h.id}]; ok && h.score > 0 {
			kw[p] = math.Max(kw[p], h.score)
			best = math.Max(best, h.score)
		}
	}
	for p := range kw {
		kw[p] /= best
	}
	set := make(map[int32]bool, len(kw)+pool)
	if haveVec {
		for _, p := range topNFrom(x.scores, x.scanStart(), pool) {
			set[p] = true
		}
	}
	if haveSem {
		for _, p := range topNFrom(x.semScores, x.scanStart(), pool) {
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
		return float64(x.semAt(p))
	}
	// channels returns item p's score in each channel. Cosine is used as
	// is, not scaled to the query's best: a query that resembles nothing
	// should not make its nearest row look like a match.
	channels := func(p int32) scoreParts {
		return scoreParts{vector: math.Max(0, float64(x.vecAt(p))), keyword: kw[p], semantic: sem(p), ranked: true}
	}
	relevance := func(c scoreParts) float64 {
		return cfg.wVec*c.vector + cfg.wKw*c.keyword + cfg.wSem*c.semantic
	}
	// neighbours returns the perceived messages before and after p (-1
	// when there is none).
	neighbours := func(p int32) (prev, next int32) {
		prev, next = -1, -1
		rank, ok := x.userRank[p]
		if !ok {
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
		// The neighbours of the matches found, not of neighbours added
		// meanwhile: a map ranged over while it grows may or may not
		// yield the new keys.
		for _, p := range slices.Sorted(maps.Keys(set)) {
			prev, next := neighbours(p)
			for _, q := range []int32{prev, next} {
				if q >= 0 {
					set[q] = true
				}
			}
		}
	}
	// A superseded memory brings the memories that replaced it along, so
	// each can be ranked above its predecessor even when the query misses
	// it.
	succ := map[int32]int32{}
	for p := range set {
		for q, hops := p, 0; x.items[q].kind == kindMemory && x.items[q].supBy != 0 && hops < 64; hops++ {
			next, ok := x.pos[itemKey{kindMemory, x.items[q].supBy}]
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
	// In position order, so that ties (the session pass's best matches,
	// the final order) fall the same way in every run.
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
	x.sessionContext(cands, cfg.wSession)
	// Every superseded memory ends strictly below the memory that replaced
	// it, whatever the query; one whose replacement scores nothing scores
	// nothing.
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
	sortCandidates(out)
	return out
}

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
