package journal

import (
	"sort"
)

// The results one NPC's index keeps are bounded (rowCache.limit); past
// the bound the least recently used are dropped and read again as needed.
// The bound is a 64th of the index cache's budget, between minRowBytes and
// maxRowBytes (rowLimit): a long-lived NPC's searches show more rows than
// the smallest bound holds, and reading them again each tick cost more than
// its whole search. When the cache is over its budget, the results of the
// other indexes are cut to minRowBytes, then to leanRowBytes, then dropped,
// before any index is dropped (Retriever.release).
const (
	minRowBytes = 256 << 10
	maxRowBytes = 4 << 20
	// leanRowBytes is what the results of each index are cut to when
	// cutting them to minRowBytes did not bring the cache within its
	// budget: the rows of a few ticks' working contexts.
	leanRowBytes = 16 << 10
)

// rowLimit is the bound of each index's results under an index cache of
// cacheBytes.
func rowLimit(cacheBytes int64) int64 {
	return min(max(cacheBytes/64, minRowBytes), maxRowBytes)
}

// keepNewBytes bounds the rows of its newest messages and journal entries
// a refresh keeps as results (see rowCache): what the next searches show
// most, a tick's working context above all.
const keepNewBytes = 64 << 10

// rowCache keeps messages and journal entries of an NPC as its search
// results show them (load's form, before scoring and joining), so a search
// showing what an earlier one showed, or what a refresh just indexed, does
// not read or build them again. Neither kind of row ever changes once
// written (ids are never reused), so a kept result never goes stale. It
// belongs to the NPC's index and is guarded by its lock; nil keeps nothing.
type rowCache struct {
	// res holds pointers: a search looks up some thirty kept results, and
	// a map of the results themselves (some 200 bytes each) made every
	// lookup copy one out and back.
	res   map[itemKey]*keptResult
	bytes int64
	// limit bounds bytes; 0 stands for minRowBytes.
	limit int64
	// seq orders the uses of kept results, for dropping the least recently
	// used first.
	seq uint64
}

type keptResult struct {
	res  Result
	keys []dedupKey // dedupKeys(&res), once a search has needed them
	size int64
	used uint64
}

// get returns the kept result of item k.
func (c *rowCache) get(k itemKey) (Result, bool) {
	if c == nil {
		return Result{}, false
	}
	e, ok := c.res[k]
	if !ok {
		return Result{}, false
	}
	c.seq++
	e.used = c.seq
	return e.res, true
}

// dedupKeys returns dedupKeys(res) for res, the result of item k, from
// the cache when it keeps them.
func (c *rowCache) dedupKeys(k itemKey, res *Result) []dedupKey {
	if c == nil {
		return dedupKeys(res)
	}
	e, ok := c.res[k]
	if !ok {
		return dedupKeys(res)
	}
	if e.keys == nil {
		e.keys = dedupKeys(res)
		n := 24 + dedupKeySize*int64(cap(e.keys))
		e.size += n
		if c.bytes += n; c.bytes > c.bound() {
			c.shrink(c.bound() * 3 / 4)
		}
	}
	return e.keys
}

// put keeps res, a message's or journal entry's result as load makes it.
func (c *rowCache) put(res Result) {
	if c == nil {
		return
	}
	c.seq++
	c.putUsed(res, c.seq)
}

// putUsed keeps res as last used at used.
func (c *rowCache) putUsed(res Result, used uint64) {
	k := itemKey{kindMessage, res.ID}
	if res.Kind == KindJournal {
		k.kind = kindJournal
	}
	if c.res == nil {
		c.res = map[itemKey]*keptResult{}
	}
	if old, ok := c.res[k]; ok {
		c.bytes -= old.size
	}
	size := resultBytes(&res)
	c.res[k] = &keptResult{res: res, size: size, used: used}
	c.bytes += size
	if c.bytes > c.bound() {
		c.shrink(c.bound() * 3 / 4)
	}
}

// bound is what c may hold.
func (c *rowCache) bound() int64 {
	if c.limit > 0 {
		return c.limit
	}
	return minRowBytes
}

// shrink drops the least recently used results until at most n bytes are
// kept.
func (c *rowCache) shrink(n int64) {
	type use struct {
		k    itemKey
		used uint64
	}
	uses := make([]use, 0, len(c.res))
	for k, e := range c.res {
		uses = append(uses, use{k, e.used})
	}
	sort.Slice(uses, func(i, j int) bool { return uses[i].used < uses[j].used })
	for _, u := range uses {
		if c.bytes <= n {
			break
		}
		c.bytes -= c.res[u.k].size
		delete(c.res, u.k)
	}
}

// resultBytes estimates what a kept result holds.
func resultBytes(r *Result) int64 {
	src := r.Sources
	n := len(r.Content) + len(r.Kind) + 8*(len(src.JournalIDs)+len(src.MessageIDs)) + 16*len(src.EventRefs)
	for _, ref := range src.EventRefs {
		n += len(ref)
	}
	return int64(n) + keptBytes
}

// keptBytes is what a kept result costs beside its text and sources: the
// keptResult (208 bytes allocated), its entry in rowCache.res and its
// sources' slices.
const keptBytes = 256

func (c *rowCache) size() int64 {
	if c == nil {
		return 0
	}
	return c.bytes
}

// keepNewest keeps the results of the newest of n rows as far as they fit
// in bound bytes, each as used in id order (an older row is dropped
// first); result(i) makes row i's result. A row whose result cannot be
// made, and those before it, are left to load, which reports what is
// wrong with it if a search shows it. The rows are kept newest first as
// they are made, not gathered first: a build keeps some hundred of them.
func (c *rowCache) keepNewest(n int, bound int64, result func(i int) (Result, error)) {
	if c == nil || n == 0 {
		return
	}
	base := c.seq
	c.seq += uint64(n)
	sum := int64(0)
	for i := n - 1; i >= 0; i-- {
		res, err := result(i)
		if err != nil {
			break
		}
		if sum += resultBytes(&res); sum > bound {
			break
		}
		c.putUsed(res, base+uint64(i)+1)
	}
}
