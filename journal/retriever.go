package journal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"gorm.io/gorm"

	"github.com/npcd/npcd/internal/int8vec"
	"github.com/npcd/npcd/internal/keeprank"
	"github.com/npcd/npcd/internal/wordvec"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// Retrieval defaults.
const (
	DefaultVectorWeight     = 0.3
	DefaultKeywordWeight    = 0.7
	DefaultHalfLife         = 30 * 24 * time.Hour
	DefaultRecencyWeight    = 0.15
	DefaultImportanceWeight = 0.10
	DefaultNeighbourWeight  = 0.5
	DefaultExpansionWeight  = 0.5
	DefaultEntityWeight     = 0.25
	DefaultSemanticWeight   = 0.6
	DefaultSessionWeight    = 0.5
	DefaultLengthNorm       = 0.3
	DefaultFeedbackWeight   = 0.2
	DefaultCacheBytes       = 128 << 20
	DefaultMaxEmbedPerCall  = 256
	DefaultMaxContentBytes  = 240
	DefaultWindowSpan       = 1
	DefaultWindowParts      = 2
	DefaultWindowReach      = 0.5
	// MaxK bounds the results of one search.
	MaxK = 100
	// supersededFactor scales the score of a superseded memory: it is still
	// found when nothing else matches ("what did you think before?"), and
	// is also kept below its replacement whatever the query.
	supersededFactor = 0.1
	// minRelevance is the relevance below which a row is not a result: the
	// offline embedder's hashed features collide, giving unrelated texts a
	// cosine of a few hundredths, and such a row would only cost tokens.
	minRelevance = 0.03
	// postgresMaxAge bounds how long an index is trusted on PostgreSQL,
	// where ids from a sequence may commit out of order and a row can
	// appear below the newest id an index has seen.
	postgresMaxAge = 10 * time.Minute
)

// Retriever finds what an NPC remembers: its memories, journal entries and
// messages (archived ones included), ranked by a blend of keyword (BM25)
// and vector (cosine) similarity, then by recency on the game's clock and
// importance. It satisfies tick.Retriever and tools.Searcher.
//
// Vectors come from the embedder the Retriever is built with (by default
// the offline embedder) and are cached twice: in the embeddings table by
// model and text hash, so a text is embedded once (a local embedder, whose
// vectors are cheaper to compute than to read, skips this table; memories
// keep their vector in their own row either way), and in memory per NPC,
// decoded, within a byte budget (least recently searched NPCs are dropped
// first). Nothing is embedded when rows are written: new rows are embedded
// in one batch by the next search of their NPC (at most MaxEmbedPerCall
// texts per search with the query in the same call), so a tick's commit
// never waits for an embedding endpoint, and rows still waiting are found by
// keyword meanwhile. Index embeds everything up front.
//
// A Retriever is safe for concurrent use; searches of one NPC are
// serialized, searches of different NPCs run in parallel.
type Retriever struct {
	store    *Store
	embedder llm.Embedder
	words    *wordvec.Table // the semantic channel's, nil when it is off
	model    string
	cfg      retrieverConfig
	log      zerolog.Logger

	access accessLog
	// scratch keeps the rank scratch of the searches that ended.
	scratch scratchList
	// dims is the dimensions of the first vector an index stored, for
	// vectorDims; 0 before.
	dims atomic.Int64
	// packing is set once the cache, or an index alone, first outgrew
	// its budget: from then on, each index packs its vectors
	// (npcIndex.packVectors) as its searches end, rather than have the
	// cache drop indexes that a world's searches would build again, or
	// an index release the vectors of its oldest rows.
	packing atomic.Bool

	mu   sync.Mutex
	npcs map[string]*npcIndex
	// cached is the sum of the sizeHint of the indexes in npcs, so a
	// search's release need not add them up.
	cached int64
	// builds counts the indexes built from the database; evictions, those
	// dropped to keep within the budget; rebuilds, the builds of an NPC
	// whose index was evicted less than thrashWindow before, listed in
	// evicted with the time it was. warnedAt is when the last warning of
	// rebuilds was logged, and unwarned counts the rebuilds since.
	builds, evictions, rebuilds int64
	evicted                     map[string]time.Time
	sweepAt                     int // the size of evicted at which old ones are forgotten
	warnedAt                    time.Time
	unwarned                    int64
	// rowReads counts the messages and journal entries searches read from
	// the database, which their indexes did not keep (rowCache).
	rowReads int64

	// floors holds, for each NPC whose index alone outgrew the budget
	// with its vectors released, the ids at or below which its messages
	// and journal entries are left out of its index (see floorFor);
	// guarded by floorMu, which an index's build takes while it holds
	// the index.
	floorMu sync.Mutex
	floors  map[string]floorIDs
	// building counts the indexes being built again above a new floor
	// (rebuild); beforeRebuild, when set (by tests), runs as each begins.
	building      sync.WaitGroup
	beforeRebuild func()
}

// thrashWindow is how soon after its eviction an index built again counts
// as a rebuild: the sign of a cache too small for the NPCs being searched,
// where searches keep rebuilding what the others' just dropped. It is also
// the least time between two warnings of it.
const thrashWindow = time.Minute

// Flush writes the recalls of memories gathered since the last write
// (access_count and last_accessed). Searches flush by themselves every 512
// memories or 10 seconds; the owner calls Flush before closing the
// database, or a test before reading those columns.
func (r *Retriever) Flush(ctx context.Context) error {
	recalls := r.access.take()
	if err := r.store.addAccess(ctx, recalls); err != nil {
		r.access.restore(recalls) // the next flush tries again
		return err
	}
	return nil
}

type retrieverConfig struct {
	wVec, wKw, wRec, wImp, wNeighbour float64
	wExpand, wEntity, wSem, wSession  float64
	lengthNorm, wFeedback             float64
	halfLife                          time.Duration
	cacheBytes                        int64
	maxEmbed                          int
	pool                              int
	maxBytes                          int
	winSpan, winParts                 int
	winReach                          float64
	// keepBytes bounds the newest rows a refresh keeps as results
	// (keepNewBytes; tests turn it off).
	keepBytes int64
}

// Option configures a Retriever. Options return ErrBadOption for values
// out of range.
type Option func(*Retriever) error

// WithWeights sets the weights of vector and keyword similarity in the
// relevance of a result (default 0.3 and 0.7: the offline embedder hashes
// word forms, so it mostly repeats BM25 and earns the smaller weight). Both
// must be ≥ 0 and at least one > 0; they are used as given, not normalized.
func WithWeights(vector, keyword float64) Option {
	return func(r *Retriever) error {
		if vector < 0 || keyword < 0 || vector+keyword == 0 || math.IsNaN(vector+keyword) || math.IsInf(vector+keyword, 0) {
			return fmt.Errorf("%w: weights vector=%v keyword=%v", ErrBadOption, vector, keyword)
		}
		r.cfg.wVec, r.cfg.wKw = vector, keyword
		return nil
	}
}

// WithHalfLife sets the game time after which the recency of a result is
// halved (default 30 days). It must be positive.
func WithHalfLife(d time.Duration) Option {
	return func(r *Retriever) error {
		if d <= 0 {
			return fmt.Errorf("%w: half-life %v", ErrBadOption, d)
		}
		r.cfg.halfLife = d
		return nil
	}
}

// WithRecency sets how much recency and importance modulate relevance
// (defaults 0.15 and 0.10): a result's score is its relevance times
// (1 − recency − importance + recency·decay + importance·importance/10), so
// the oldest, least important result keeps about three quarters of its
// relevance by default and neither ever lifts an irrelevant one. Both must
// be ≥ 0 with a sum ≤ 1.
func WithRecency(recency, importance float64) Option {
	return func(r *Retriever) error {
		if recency < 0 || importance < 0 || recency+importance > 1 || math.IsNaN(recency+importance) {
			return fmt.Errorf("%w: recency=%v importance=%v", ErrBadOption, recency, importance)
		}
		r.cfg.wRec, r.cfg.wImp = recency, importance
		return nil
	}
}

// WithNeighbours sets how much of the relevance of the neighbouring
// perceived messages (the one before and the one after) a perceived message
// gains (default 0.5). In conversation the answer that holds a fact often
// follows the question that names its topic. It must be in [0, 1].
func WithNeighbours(w float64) Option {
	return weight("neighbour weight", w, 1, func(c *retrieverConfig) *float64 { return &c.wNeighbour })
}

// WithExpansion sets the weight, beside 1 for the query's own words, of
// the words of the NPC's memory that share a query word's root (Porter
// stem) without sharing its light stem: "adoption" for "adopt",
// "educate" for "education", "happy" for "happiness" (default
// DefaultExpansionWeight; 0 turns expansion off). It must be in [0, 1].
func WithExpansion(w float64) Option {
	return weight("expansion weight", w, 1, func(c *retrieverConfig) *float64 { return &c.wExpand })
}

// WithEntity sets how much a result by or about someone the query names
// gains: the perceived messages that person spoke or did, the memories
// about them. Their relevance is multiplied by 1 + w (default
// DefaultEntityWeight; 0 turns it off). It must be in [0, 4].
func WithEntity(w float64) Option {
	return weight("entity weight", w, 4, func(c *retrieverConfig) *float64 { return &c.wEntity })
}

// WithSemantic sets the weight of semantic similarity in the relevance of
// a result, beside the vector and keyword weights (default
// DefaultSemanticWeight; 0 turns the channel off and loads no word
// vectors): the similarity of the meanings of the query's words and the
// result's, from offline word vectors (package internal/wordvec), so a
// paraphrase is found without a shared word. It must be in [0, 1].
func WithSemantic(w float64) Option {
	return weight("semantic weight", w, 1, func(c *retrieverConfig) *float64 { return &c.wSem })
}

// WithSession sets how much a result gains from being on the same game
// day as the best matches of the query (default DefaultSessionWeight; 0
// turns it off): its score is multiplied by 1 + w times the share of that
// day among the scores of the five best-matching perceived messages. What
// was said in the same sitting as the best matches is
// likely part of the same story: the reply that holds the date, the
// greeting that says what happened. It must be in [0, 2].
func WithSession(w float64) Option {
	return weight("session weight", w, 2, func(c *retrieverConfig) *float64 { return &c.wSession })
}

// WithLengthNorm sets BM25's length normalization b of the keyword
// channel (default DefaultLengthNorm, below the usual 0.75 of FTS5 and
// Lucene): how much a long text's matches count less than a short one's.
// Lines of conversation are short and vary little in length, and a short
// one ("thanks, I love my family!") is rarely about its words more than a
// longer one that tells what happened; with the usual normalization such
// lines crowd out the ones that hold the facts. 0 ignores length, 1
// normalizes fully. It must be in [0, 1].
func WithLengthNorm(b float64) Option {
	return weight("length normalization", b, 1, func(c *retrieverConfig) *float64 { return &c.lengthNorm })
}

// WithFeedback sets the weight of pseudo-relevance feedback in the
// keyword channel (default DefaultFeedbackWeight; 0 turns it off): the
// most telling words of the three best-matching perceived messages, which
// the query lacks, are searched for too, and their best hit counts w
// times the query's best. The best matches say, in the NPC's own words,
// what the query is about, so lines that share no word with the query
// but share the story with its best matches are found. It must be in
// [0, 1].
func WithFeedback(w float64) Option {
	return weight("feedback weight", w, 1, func(c *retrieverConfig) *float64 { return &c.wFeedback })
}

// weight is an Option setting the weight field gives to w, refused
// unless w is in [0, hi].
func weight(what string, w, hi float64, field func(*retrieverConfig) *float64) Option {
	return func(r *Retriever) error {
		if w < 0 || w > hi || math.IsNaN(w) {
			return fmt.Errorf("%w: %s %v", ErrBadOption, what, w)
		}
		*field(&r.cfg) = w
		return nil
	}
}

// WithWindow sets how results from neighbouring perceived messages join
// into one (defaults 1, 2 and 0.5): a message at most span perceived
// messages from one a result holds joins that result, up to parts messages
// per result, instead of taking a place of its own, and below the k-th
// result a message still joins when it scores at least reach times what
// that result scores. A reply comes back with its question, and the
// results left free hold other things. The joined result's content stays
// within the content bound (WithMaxContentBytes), and it cites the messages
// whose text it shows. parts 1 (or 0) joins nothing; otherwise span must be
// in [1, 8], parts in [2, 8] and reach in [0, 1].
func WithWindow(span, parts int, reach float64) Option {
	return func(r *Retriever) error {
		if parts <= 1 {
			r.cfg.winParts = 1
			return nil
		}
		if span < 1 || span > 8 || parts > 8 || reach < 0 || reach > 1 || math.IsNaN(reach) {
			return fmt.Errorf("%w: window span=%d parts=%d reach=%v", ErrBadOption, span, parts, reach)
		}
		r.cfg.winSpan, r.cfg.winParts, r.cfg.winReach = span, parts, reach
		return nil
	}
}

// WithEmbedder sets the embedder and the name of its model (default: the
// offline embedder). The name keys the embedding cache, so it must change
// whenever the vectors would (another model, another dimension count).
func WithEmbedder(e llm.Embedder, model string) Option {
	return func(r *Retriever) error {
		if e == nil || model == "" {
			return fmt.Errorf("%w: an embedder needs a model name", ErrBadOption)
		}
		if len(model) > 128 {
			return fmt.Errorf("%w: embedding model name longer than 128 bytes", ErrBadOption)
		}
		r.embedder, r.model = e, model
		return nil
	}
}

// WithCacheBytes bounds the memory the in-memory indexes of all NPCs may
// hold (default 128 MiB); least recently searched NPCs are dropped first.
// The NPC being searched is always kept. An index that alone outgrows the
// budget first releases the vectors of its oldest rows (trimVectors), then
// leaves its oldest messages out (floorFor), so that one NPC's index stays
// within the budget however long it lives. It must be positive.
func WithCacheBytes(n int64) Option {
	return func(r *Retriever) error {
		if n <= 0 {
			return fmt.Errorf("%w: cache bytes %d", ErrBadOption, n)
		}
		r.cfg.cacheBytes = n
		return nil
	}
}

// WithMaxEmbedPerCall bounds how many new texts one search sends to the
// embedder (default 256). It must be positive.
func WithMaxEmbedPerCall(n int) Option {
	return func(r *Retriever) error {
		if n <= 0 {
			return fmt.Errorf("%w: max embed per call %d", ErrBadOption, n)
		}
		r.cfg.maxEmbed = n
		return nil
	}
}

// WithMaxContentBytes bounds the content of each result (default 240
// bytes, what the tick's working context shows of a memory): longer
// contents are cut to the sentences that match the query best, with an
// ellipsis where text was left out. 0 returns contents whole; otherwise n
// must be at least 32.
func WithMaxContentBytes(n int) Option {
	return func(r *Retriever) error {
		if n < 0 || n > 0 && n < 32 {
			return fmt.Errorf("%w: max content bytes %d", ErrBadOption, n)
		}
		r.cfg.maxBytes = n
		return nil
	}
}

// WithLogger sets the logger for failures a search survives, such as an
// embedding endpoint that is down (default: zerolog.Nop()).
func WithLogger(l zerolog.Logger) Option {
	return func(r *Retriever) error { r.log = l; return nil }
}

// NewRetriever returns a Retriever over s, whose database holds the schema of
// this package's and package character's migrations.
func NewRetriever(s *Store, opts ...Option) (*Retriever, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: a store is required", ErrBadOption)
	}
	r := &Retriever{store: s, log: zerolog.Nop(), npcs: map[string]*npcIndex{}, cfg: retrieverConfig{
		wVec: DefaultVectorWeight, wKw: DefaultKeywordWeight, wRec: DefaultRecencyWeight, wImp: DefaultImportanceWeight,
		wNeighbour: DefaultNeighbourWeight, wExpand: DefaultExpansionWeight, wEntity: DefaultEntityWeight, wSem: DefaultSemanticWeight, wSession: DefaultSessionWeight, lengthNorm: DefaultLengthNorm, wFeedback: DefaultFeedbackWeight, halfLife: DefaultHalfLife, cacheBytes: DefaultCacheBytes,
		maxEmbed: DefaultMaxEmbedPerCall, pool: 100, maxBytes: DefaultMaxContentBytes,
		winSpan: DefaultWindowSpan, winParts: DefaultWindowParts, winReach: DefaultWindowReach,
		keepBytes: keepNewBytes,
	}}
	for _, o := range opts {
		if err := o(r); err != nil {
			return nil, err
		}
	}
	if r.cfg.wSem > 0 {
		t, err := wordvec.Default()
		if err != nil {
			return nil, err
		}
		r.words = t
	}
	if r.embedder == nil {
		e, err := llm.NewOfflineEmbedder(0)
		if err != nil {
			return nil, err
		}
		r.embedder, r.model = e, e.Model()
	}
	return r, nil
}

// Model returns the name of the embedding model in use.
func (r *Retriever) Model() string { return r.model }

// DeleteNPC drops the cached index of NPC id. It does not touch the
// database (Store.DeleteNPC does), so it fits tick.Owner and can be listed
// next to the Store.
func (r *Retriever) DeleteNPC(_ context.Context, _ *gorm.DB, id string) error {
	r.forget(id)
	return nil
}

// CacheStats is the size of the in-memory search index cache.
type CacheStats struct {
	// Bytes is what the cached indexes hold, as measured when each was last
	// released; Limit is the budget (WithCacheBytes).
	Bytes, Limit int64
	// Entries is how many NPCs have an index cached.
	Entries int
	// Builds counts the indexes built from the database since the
	// Retriever was made (an NPC's first search, or one after its index was
	// dropped); Evictions, the indexes dropped to keep within the budget;
	// Rebuilds, the builds of an NPC whose index had been evicted less than
	// a minute before. Rebuilds that keep growing mean the budget is too
	// small for the NPCs being searched: each costs a whole index build,
	// reading the NPC's past from the database.
	Builds, Evictions, Rebuilds int64
	// RowReads counts the messages and journal entries that searches
	// showed and read from the database because their NPC's index did not
	// keep them (rowCache): the first showing of an archived row, and
	// every row read again after the cache, over its budget, cut the
	// results the indexes keep. Reads that grow with the ticks mean the
	// budget is too small to keep them.
	RowReads int64
	// Floored counts the NPCs whose index alone outgrew the budget with
	// the vectors of its oldest rows released, and whose oldest messages
	// are therefore left out of it (see WithCacheBytes).
	Floored int
}

// CacheStats reports the cache's size, for metrics.
func (r *Retriever) CacheStats() CacheStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := CacheStats{Limit: r.cfg.cacheBytes, Entries: len(r.npcs), Builds: r.builds, Evictions: r.evictions, Rebuilds: r.rebuilds,
		RowReads: r.rowReads}
	for _, x := range r.npcs {
		st.Bytes += x.sizeHint
	}
	r.floorMu.Lock()
	st.Floored = len(r.floors)
	r.floorMu.Unlock()
	return st
}

// Forget drops the cached index of NPC id. The engine calls it again once a
// delete has committed: a search that read the NPC's rows while the delete
// ran may have cached them after DeleteNPC.
func (r *Retriever) Forget(id string) { r.forget(id) }

func (r *Retriever) forget(id string) {
	r.mu.Lock()
	r.remove(id)
	r.mu.Unlock()
	r.floorMu.Lock()
	delete(r.floors, id)
	r.floorMu.Unlock()
}

// remove drops NPC id's index from the cache; r.mu must be held.
func (r *Retriever) remove(id string) {
	if x, ok := r.npcs[id]; ok {
		r.cached -= x.sizeHint
		delete(r.npcs, id)
	}
}

// acquire returns NPC id's index, locked and up to date with the database.
// The caller unlocks it with release.
func (r *Retriever) acquire(ctx context.Context, id string) (*npcIndex, error) {
	return r.acquireAt(ctx, id, nil)
}

// acquireAt is acquire bringing the index up to date with the marks m
// when they are set (see Marks).
func (r *Retriever) acquireAt(ctx context.Context, id string, m *Marks) (*npcIndex, error) {
	for attempt := 0; ; attempt++ {
		r.mu.Lock()
		x, ok := r.npcs[id]
		if !ok {
			x = r.newIndex(id)
			r.npcs[id] = x
			r.built(id, x.builtAt)
		}
		r.mu.Unlock()
		x.mu.Lock()
		stale := !store.IsSQLite(r.store.db) && time.Since(x.builtAt) > postgresMaxAge
		if stale && attempt == 0 {
			x.mu.Unlock()
			r.drop(id, x)
			continue
		}
		err := r.refreshAt(ctx, x, m)
		if errors.Is(err, errFloored) { // the floor only rises: this ends
			x.mu.Unlock()
			r.drop(id, x)
			continue
		}
		if errors.Is(err, errReset) && attempt == 0 {
			x.mu.Unlock()
			r.drop(id, x)
			continue
		}
		if err != nil {
			x.mu.Unlock()
			return nil, err
		}
		return x, nil
	}
}

// newIndex makes an empty index of NPC id, above its floor.
func (r *Retriever) newIndex(id string) *npcIndex {
	x := newIndex(id)
	x.floor = r.floor(id)
	x.lastMsg, x.lastEntry = x.floor.msg, x.floor.entry
	x.wv = r.words
	x.rows.limit = rowLimit(r.cfg.cacheBytes)
	x.builtAt = time.Now()
	return x
}

// built counts the build of NPC id's index, and a rebuild if the index
// was evicted less than thrashWindow before; the first rebuild after
// thrashWindow without a warning logs one. r.mu must be held.
func (r *Retriever) built(id string, now time.Time) {
	r.builds++
	at, ok := r.evicted[id]
	if !ok {
		return
	}
	delete(r.evicted, id)
	if now.Sub(at) >= thrashWindow {
		return
	}
	r.rebuilds++
	r.unwarned++
	if now.Sub(r.warnedAt) < thrashWindow {
		return
	}
	r.log.Warn().Int64("rebuilds", r.unwarned).Int("indexes_cached", len(r.npcs)).Int64("cache_bytes", r.cached).
		Int64("cache_limit_bytes", r.cfg.cacheBytes).
		Msg("the search index cache is too small for the NPCs being searched: indexes dropped to keep within its budget were built again within a minute, each reading its NPC's past from the database; raise the budget (NPCD_INDEX_CACHE_MB)")
	r.warnedAt, r.unwarned = now, 0
}

// evict drops NPC id's index to keep within the budget, remembering when
// for built; r.mu must be held.
func (r *Retriever) evict(id string, now time.Time) {
	r.remove(id)
	r.evictions++
	if r.evicted == nil {
		r.evicted = map[string]time.Time{}
	}
	if len(r.evicted) >= r.sweepAt { // forget the evictions too old to matter
		for k, at := range r.evicted {
			if now.Sub(at) >= thrashWindow {
				delete(r.evicted, k)
			}
		}
		r.sweepAt = max(1024, 2*len(r.evicted))
	}
	r.evicted[id] = now
}

// trim brings x, of size bytes, within the cache's budget as far as its
// vectors go: it packs them (npcIndex.packVectors, and every index from
// then on: startPacking), then releases those of its oldest items while
// it still outgrows the budget (npcIndex.trimVectors), saying so the
// first time, and returns x's size after. The caller holds x.
func (r *Retriever) trim(x *npcIndex, size int64) int64 {
	if limit := r.cfg.cacheBytes; limit > 0 && size > limit && x.dims > 0 {
		r.startPacking()
		if x.packVectors() > 0 {
			size = x.bytes()
		}
	}
	before := x.vecFrom
	if !x.trimVectors(size, r.cfg.cacheBytes) {
		return size
	}
	size = x.bytes()
	if before == 0 { // said once per index: it never holds them again
		r.log.Info().Str("npc", x.npc).Int("items", len(x.items)).Int("vectors_released", x.vecFrom).Int64("index_bytes", size).
			Int64("cache_limit_bytes", r.cfg.cacheBytes).
			Msg("an NPC's search index outgrew the cache's budget: the vectors of its oldest rows are released, and those rows are found by their words (raise NPCD_INDEX_CACHE_MB to keep them)")
	}
	return size
}

// startPacking has every index pack its vectors from now on (packing),
// saying so the first time.
func (r *Retriever) startPacking() {
	if !r.packing.Swap(true) {
		r.log.Info().Int64("cache_limit_bytes", r.cfg.cacheBytes).
			Msg("the search index cache outgrew its budget: indexes of vectors of at most " + strconv.Itoa(maxPackedDims) +
				" dimensions (the offline embedder's) now hold them packed, their nonzero codes only, before any vector is released or index dropped (raise NPCD_INDEX_CACHE_MB to keep them whole)")
	}
}

// vectorDims is the dimensions of the embedder's vectors when known: from
// the embedder when it tells (the offline one), else from the first vector
// an index of r stored; 0 before that.
func (r *Retriever) vectorDims() int {
	if e, ok := r.embedder.(interface{ Dims() int }); ok {
		return e.Dims()
	}
	return int(r.dims.Load())
}

// drop removes x from the cache if it is still the index of id.
func (r *Retriever) drop(id string, x *npcIndex) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.npcs[id] == x {
		r.remove(id)
	}
}

// release unlocks x and keeps the cache within its byte budget: once over
// it, the results other indexes keep are cut, then indexes other than x
// dropped (see below), down to 15/16 of it.
func (r *Retriever) release(x *npcIndex) {
	if r.packing.Load() {
		x.packVectors()
	}
	used, size := time.Now(), r.trim(x, x.bytes())
	if x.dims > 0 {
		r.dims.CompareAndSwap(0, int64(x.dims))
	}
	// An index over the budget with its vectors released is built again
	// above a higher floor, beside it, once (rebuild).
	rebuild := false
	if !x.rebuilding {
		if floor, keep, ok := r.floorFor(x, size); ok {
			r.raiseFloor(x, floor, keep, size)
			x.rebuilding, rebuild = true, true
		}
	}
	reads := x.rows.takeReads()
	x.mu.Unlock()
	if rebuild {
		r.building.Add(1)
		go r.rebuild(x)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rowReads += reads
	if r.npcs[x.npc] == x {
		r.cached += size - x.sizeHint
	}
	x.sizeHint, x.usedHint = size, used
	if r.cached <= r.cfg.cacheBytes {
		return
	}
	// Once over its budget, the cache is brought down to 15/16 of it, so
	// that the sort below is not paid at every search of a cache that
	// stays full (a thousand NPCs: some 50 µs a search).
	goal := r.cfg.cacheBytes - r.cfg.cacheBytes/16
	ids := make([]keeprank.Entry, 0, len(r.npcs))
	for id, y := range r.npcs {
		ids = append(ids, keeprank.Entry{ID: id, Used: y.usedHint.UnixNano()})
	}
	slices.SortFunc(ids, func(a, b keeprank.Entry) int { return cmp.Compare(a.Used, b.Used) })
	// The results the other indexes keep go first, cut to the smallest
	// bound, the least recently searched first, then, if that is not
	// enough, to a few ticks' worth (leanRowBytes), then all of them:
	// reading a few rows again costs a tick far less than building an
	// index again (a tick's search takes the messages of the NPC's live
	// history from that history, so what it reads again is the journal
	// entries and archived messages it shows). An index in use is left
	// alone (it is dropped below if need be).
	for _, floor := range []int64{minRowBytes, leanRowBytes, 0} {
		if r.shrinkOthers(x, ids, goal, func(y *npcIndex) bool {
			if y.rows.size() <= floor {
				return false
			}
			y.rows.shrink(floor)
			return true
		}) {
			return
		}
	}
	// Then the indexes not in use pack their vectors, the least recently
	// searched first, and every index packs its own from then on
	// (packing): a packed row holds two bytes per code set, some 130 of
	// 256 for a line of conversation, and its scan takes some 2.5 times
	// as long (BenchmarkScan100k: 3.6 ms for 100,000 rows, 1.5 whole). A
	// search of a few thousand rows takes some 100 µs more; an NPC whose
	// index is built again waits tens of milliseconds.
	r.startPacking()
	if r.shrinkOthers(x, ids, goal, func(y *npcIndex) bool { return y.packVectors() > 0 }) {
		return
	}
	// Indexes are dropped in keeprank's order. A game that ticks its NPCs
	// in turn searches next the NPC searched least recently: dropping that
	// one first would have every tick build its index again once the NPCs
	// outgrow the cache; in keeprank's order most NPCs stay and the others
	// are built again (12 NPCs searched in turn with room for 9: 5 or 6
	// builds a round, 12 least recently searched first).
	keeprank.DropOrder(ids)
	for _, e := range ids {
		if r.cached <= goal {
			break
		}
		if y := r.npcs[e.ID]; y != x {
			r.evict(e.ID, used)
		}
	}
}

// shrinkOthers has shrink make each index of ids but x smaller, in their
// order, skipping those in use, until the cache is within goal, and counts
// what each holds after one that shrink reports it changed; it reports
// whether the cache came within goal. The caller holds r.mu.
func (r *Retriever) shrinkOthers(x *npcIndex, ids []keeprank.Entry, goal int64, shrink func(y *npcIndex) bool) bool {
	for _, e := range ids {
		if r.cached <= goal {
			return true
		}
		y := r.npcs[e.ID]
		if y == x || !y.mu.TryLock() {
			continue
		}
		if !shrink(y) {
			y.mu.Unlock()
			continue
		}
		size := y.bytes()
		y.mu.Unlock()
		r.cached += size - y.sizeHint
		y.sizeHint = size
	}
	return r.cached <= goal
}

// Index embeds every row of NPC id that has no vector yet, in batches of
// MaxEmbedPerCall, so the first searches after a restart or an import do not
// have to. It is safe to call while searches run.
func (r *Retriever) Index(ctx context.Context, id string) error {
	x, err := r.acquire(ctx, id)
	if err != nil {
		return err
	}
	defer r.release(x)
	for len(x.pending) > 0 {
		before := len(x.pending)
		if _, err := r.embedPending(ctx, x, "", r.cfg.maxEmbed); err != nil {
			return fmt.Errorf("index %q: %w", id, err)
		}
		if len(x.pending) >= before {
			return fmt.Errorf("index %q: %w: no progress", id, ErrEmbedding)
		}
	}
	return nil
}

// WarmShare is the share of the cache's budget Warm fills at most, so that
// the NPCs searched first after it still find room without dropping what
// it built.
const WarmShare = 0.75

// Warm builds the search indexes of the NPCs ids, in order, ahead of their
// first searches: what an NPC's first search after a start would do (read
// its whole past, compute its vectors), which for a long-lived NPC takes
// seconds. It stops once the cache holds WarmShare of its budget, when ctx
// ends (returning nil) or at the first error, and returns how many indexes
// it built. An NPC already cached is skipped; one that no longer exists is
// built empty, as its search would. hold, when not nil, is called before
// each build and its release after: the owner's hold on the NPC (its
// lease), without which the index would be dropped as stale at the NPC's
// next use; an NPC it refuses (ok false) is skipped. With an embedder
// that is not local (vectors that cost a call) only the texts whose
// vectors are stored get theirs, the rest are left to the searches, which
// embed them in batches as they need them.
func (r *Retriever) Warm(ctx context.Context, ids []string, hold func(ctx context.Context, id string) (release func(), ok bool)) (int, error) {
	built := 0
	for _, id := range ids {
		if ctx.Err() != nil {
			return built, nil
		}
		r.mu.Lock()
		_, cached := r.npcs[id]
		full := float64(r.cached) >= WarmShare*float64(r.cfg.cacheBytes)
		r.mu.Unlock()
		if full {
			break
		}
		if cached {
			continue
		}
		release := func() {}
		if hold != nil {
			var ok bool
			if release, ok = hold(ctx, id); !ok {
				continue
			}
		}
		err := r.warm(ctx, id)
		release()
		if err != nil {
			if ctx.Err() != nil {
				return built, nil
			}
			return built, err
		}
		built++
	}
	return built, nil
}

// warm builds NPC id's index and gives its items their vectors.
func (r *Retriever) warm(ctx context.Context, id string) error {
	x, err := r.acquire(ctx, id)
	if err != nil {
		return err
	}
	defer r.release(x)
	limit := 0 // stored vectors only
	if !r.persists() {
		limit = len(x.pending)
	}
	if _, err := r.embedPending(ctx, x, "", limit); err != nil {
		return fmt.Errorf("warm the index of %q: %w", id, err)
	}
	x.ensureSemantic()
	return nil
}

// now returns the NPC's game clock, as the refresh of x read it: its latest
// perceived game time, or the newest item's time when the NPC has none.
func (r *Retriever) now(x *npcIndex) time.Time {
	if ts := x.gameTime; !ts.IsZero() && ts.Unix() > 0 {
		return ts
	}
	return time.Unix(x.newest, 0).UTC()
}

// scan computes the cosine of q with every item into x.scores, in parallel
// for large indexes: q is quantized like the items' vectors, and each
// score is the dot product of the two codes times both scales.
func (x *npcIndex) scan(q []float32) {
	n := len(x.items)
	if cap(x.scores) < n {
		x.scores = make([]float32, n, n+n/4)
	}
	x.scores = x.scores[:n]
	if !x.query(q) {
		clear(x.scores)
		return
	}
	d, qs := x.dims, x.qcs
	start := x.scanStart()
	if start < x.vecFrom {
		start = x.scanReleased(start)
	}
	if x.sparse {
		sq := &x.qSparse
		parallel(n-start, (n-start)*len(sq.idx), func(lo, hi int) {
			var dots [blockRows]int32
			for i := start + lo; i < start+hi; {
				if x.vecs.packedAt(i) != nil { // its rows' codes set, with the whole query
					k := dotRun(&x.vecs, x.qc, i, start+hi, &dots)
					for j, dot := range dots[:k] {
						x.scores[i+j] = float32(dot) * x.vecScale[i+j] * qs
					}
					i += k
					continue
				}
				x.scores[i] = float32(sq.dot(x.vecs.row(i))) * x.vecScale[i] * qs
				i++
			}
		})
		return
	}
	qc := x.qc
	parallel(n-start, (n-start)*d, func(lo, hi int) {
		var dots [blockRows]int32
		for i := start + lo; i < start+hi; {
			k := dotRun(&x.vecs, qc, i, start+hi, &dots)
			scores, scales := x.scores[i:i+k], x.vecScale[i:i+k]
			for j, dot := range dots[:k] {
				scores[j] = float32(dot) * scales[j] * qs
			}
			i += k
		}
	})
}

// scanReleased scores the items from start whose vectors were released
// (trimVectors), and returns where the vectors held begin: 0 for all but
// memories, which keep theirs.
func (x *npcIndex) scanReleased(start int) int {
	clear(x.scores[start:x.vecFrom])
	for p := range x.oldMems {
		if int(p) >= start {
			x.scores[p] = x.cosine(p)
		}
	}
	return x.vecFrom
}

// bounded reports whether the current search is bounded
// (SearchOptions.Window): it then takes boundedPool candidates per result
// from each channel and, with a lexical embedder, scans the vector channel
// only for a query term the NPC's rows do not hold, a number aside
// (vectorPoolNeeded), whatever the number of items the NPC holds; only
// past the bound do its scans skip the older items (scanStart).
func (x *npcIndex) bounded() bool {
	return x.bound > 0
}

// scanStart is the first position a scan covers: 0, or within a bounded
// search (SearchOptions.Window) the first of the bound's most recent items.
func (x *npcIndex) scanStart() int {
	if x.bound <= 0 {
		return 0
	}
	return max(0, len(x.items)-x.bound)
}

// query makes q the query of the scans and of cosine: its int8 codes,
// their scale, and its nonzero codes when the scans use them (sparse, with
// fewer than a third set). It reports false when no item can score above 0
// against q.
func (x *npcIndex) query(q []float32) bool {
	x.qv, x.sparse, x.qcs = q, false, 0
	d := x.dims
	if q == nil || d == 0 || len(q) != d {
		return false
	}
	if cap(x.qc) < d {
		x.qc = make([]int8, d)
	}
	x.qc = x.qc[:d]
	x.qcs = quantize(x.qc, q)
	if x.qcs == 0 {
		return false
	}
	x.qSparse.set(x.qc)
	x.sparse = sparseQuery(len(x.qSparse.idx), d)
	return true
}

// sparseQuery tells whether a query of nonzero codes out of d is scanned
// by its nonzero codes (sparse8.dot) rather than by dot8. A sparse dot
// costs about a nanosecond per nonzero code; dot8 with vector
// instructions (int8vec) about 15 ns for 256 codes, and 130 without them,
// where sparse wins below a third set.
func sparseQuery(nonzero, d int) bool {
	if int8vec.SIMD() {
		return 16*nonzero <= d
	}
	return 3*nonzero < d
}

// cosine is item p's cosine with the query (see query), 0 without one.
// scan computes the same in its loops, without the per-item checks: a
// call per row there cost a tenth more on BenchmarkScan100k.
func (x *npcIndex) cosine(p int32) float32 {
	if x.qcs == 0 {
		return 0
	}
	if pk := x.vecs.packedAt(int(p)); pk != nil {
		var dot [1]int32
		pk.dots(x.qc, int(p)%blockRows, dot[:])
		return float32(dot[0]) * x.vecScale[p] * x.qcs
	}
	row := x.vecRow(int(p))
	if row == nil {
		return 0
	}
	if x.sparse {
		return float32(x.qSparse.dot(row)) * x.vecScale[p] * x.qcs
	}
	return float32(dot8(x.qc, row)) * x.vecScale[p] * x.qcs
}

// vecAt is item p's cosine with the query of the last scan, computed when
// p lies before what the scan covered or the search did not scan
// (noVecPool).
func (x *npcIndex) vecAt(p int32) float32 {
	if !x.noVecPool && int(p) >= x.scanStart() {
		return x.scores[p]
	}
	return x.cosine(p)
}

// parallel runs work over [0, n) in chunks, on every processor when the
// work (cost, in multiplications) is large enough to pay for it.
func parallel(n, cost int, work func(lo, hi int)) {
	procs := runtime.GOMAXPROCS(0)
	if procs < 2 || cost < 1<<21 {
		work(0, n)
		return
	}
	// Small chunks taken in turn, so a worker whose core is busy with
	// something else does not hold the whole search back.
	const chunk = 4096
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < procs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(next.Add(chunk)) - chunk
				if lo >= n {
					return
				}
				work(lo, min(lo+chunk, n))
			}
		}()
	}
	wg.Wait()
}

// topNInto appends to dst the positions of the n highest of scores[lo:],
// counted from 0, best first, in the heap scratch of x.
func (x *npcIndex) topNInto(dst []int32, scores []float32, lo, n int) []int32 {
	return topNAppend(dst, &x.scratch().heap, scores, lo, n)
}

// topNAppend appends to dst the positions of the n highest positive
// scores of scores[lo:], best first, with *h as the heap's memory. Of
// equal scores at the cut, the earliest positions stay.
func topNAppend(dst []int32, h *[]scored, scores []float32, lo, n int) []int32 {
	hp := minHeap((*h)[:0])
	if n <= 0 {
		return dst
	}
	for i, s := range scores[lo:] {
		if s <= 0 {
			continue
		}
		if len(hp) < n {
			hp = append(hp, scored{int32(lo + i), s})
			hp.up(len(hp) - 1)
		} else if s > hp[0].s {
			hp[0] = scored{int32(lo + i), s}
			hp.down(0)
		}
	}
	*h = hp
	start := len(dst)
	dst = slices.Grow(dst, len(hp))[:start+len(hp)]
	for i := len(dst) - 1; i >= start; i-- {
		dst[i] = hp[0].p
		last := len(hp) - 1
		hp[0] = hp[last]
		hp = hp[:last]
		hp.down(0)
	}
	return dst
}

type scored struct {
	p int32
	s float32
}

// minHeap is a min-heap of scores, the lowest score (then the earliest
// position) on top.
type minHeap []scored

func (h minHeap) less(i, j int) bool {
	if h[i].s != h[j].s {
		return h[i].s < h[j].s
	}
	return h[i].p < h[j].p
}

func (h minHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func (h minHeap) down(i int) {
	n := len(h)
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if j2 := j + 1; j2 < n && h.less(j2, j) {
			j = j2
		}
		if !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

// MemoryMatch is a memory similar to some content.
type MemoryMatch struct {
	Memory     Memory
	Similarity float64 // cosine of the two vectors, as their int8 codes give it
}

// NearDuplicates returns up to limit current memories of NPC npc whose
// vector has a cosine of at least minSim (in (0, 1]) with content's, most
// similar first: what consolidation merges with instead of adding. With
// the offline embedder a high similarity means the same words, not the same
// meaning. Exact duplicates are cheaper to find with Store.MemoriesByHash.
func (r *Retriever) NearDuplicates(ctx context.Context, npc, content string, minSim float64, limit int) ([]MemoryMatch, error) {
	if minSim <= 0 || minSim > 1 || math.IsNaN(minSim) {
		return nil, fmt.Errorf("%w: similarity threshold %v", ErrInvalid, minSim)
	}
	if limit <= 0 || normalizeContent(content) == "" {
		return nil, nil
	}
	x, err := r.acquire(ctx, npc)
	if err != nil {
		return nil, err
	}
	defer r.release(x)
	qv, err := r.embedPending(ctx, x, content, r.cfg.maxEmbed)
	if err != nil {
		return nil, fmt.Errorf("near duplicates for %q: %w", npc, err)
	}
	// Only current memories can be duplicates: their cosines alone are
	// computed, so a sleep's merges cost what the NPC's memories hold, not
	// its whole life of messages. A memory still without its vector has a
	// row of zeros, below any threshold.
	var hits []scored
	if x.query(qv) {
		for _, p := range x.mems {
			if x.items[p].supBy != 0 {
				continue
			}
			if s := x.cosine(p); float64(s) >= minSim {
				hits = append(hits, scored{p, s})
			}
		}
	}
	slices.SortFunc(hits, func(a, b scored) int {
		if a.s != b.s {
			return cmp.Compare(b.s, a.s)
		}
		return cmp.Compare(a.p, b.p)
	})
	var ids []int64
	sims := map[int64]float64{}
	for _, h := range hits[:min(len(hits), limit)] {
		id := x.items[h.p].id
		ids = append(ids, id)
		sims[id] = float64(h.s)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	var ms []Memory
	if err := r.store.q(ctx).Where("character_id = ? AND id IN ? AND superseded_at IS NULL", npc, ids).Find(&ms).Error; err != nil {
		return nil, fmt.Errorf("near duplicates for %q: %w", npc, err)
	}
	out := make([]MemoryMatch, 0, len(ms))
	for _, m := range ms {
		out = append(out, MemoryMatch{Memory: m, Similarity: sims[m.ID]})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Similarity != out[j].Similarity {
			return out[i].Similarity > out[j].Similarity
		}
		return out[i].Memory.ID < out[j].Memory.ID
	})
	return out, nil
}
