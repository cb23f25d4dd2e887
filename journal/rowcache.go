package journal

import (
	"math/bits"
	"sort"
	"unsafe"
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
//
// The results sit side by side in chunks of slots, found through a map of
// numbers. A world of 1,000 NPCs keeps some hundred thousand of them: as
// objects of their own, each with its dedup keys, they were a fifth of the
// objects the collector traced at each collection.
type rowCache struct {
	at map[itemKey]int32 // the slot of each kept result (slot)
	// chunks hold the slots (chunkLen): a full array is not copied into a
	// larger one, and the chunks a shrink leaves empty are dropped.
	chunks [][]keptResult
	free   []int32 // the slots that hold nothing
	bytes  int64
	// limit bounds bytes; 0 stands for minRowBytes.
	limit int64
	// seq orders the uses of kept results, for dropping the least recently
	// used first.
	seq uint64
	// reads counts the rows read from the database to be kept here since
	// the Retriever last took them (takeReads): what a search could not
	// find kept.
	reads int64
}

// The slots come in chunks of 8, 16 and 32, then 64 each: a small cache
// leaves few slots empty, a large one makes few objects.
const (
	firstChunk   = 8
	chunkDoubles = 3 // chunks after the first that double in size
	// doubledSlots is the number of slots of the chunks before the first
	// of the largest size.
	doubledSlots = firstChunk * (1<<chunkDoubles - 1)
	lastChunk    = firstChunk << chunkDoubles
)

// chunkLen is the number of slots of chunk k.
func chunkLen(k int) int { return firstChunk << min(k, chunkDoubles) }

// chunkStart is the first slot of chunk k, the number of slots before it.
func chunkStart(k int) int {
	if k <= chunkDoubles {
		return firstChunk * (1<<k - 1)
	}
	return doubledSlots + lastChunk*(k-chunkDoubles)
}

// chunksFor is the number of chunks n results fill.
func chunksFor(n int) int {
	if n <= doubledSlots {
		return bits.Len(uint((n + firstChunk - 1) / firstChunk))
	}
	return chunkDoubles + (n-doubledSlots+lastChunk-1)/lastChunk
}

// slot returns the kept result in slot i.
func (c *rowCache) slot(i int32) *keptResult {
	if int(i) < doubledSlots {
		k := bits.Len(uint(int(i)/firstChunk+1)) - 1
		return &c.chunks[k][int(i)-chunkStart(k)]
	}
	j := int(i) - doubledSlots
	return &c.chunks[chunkDoubles+j/lastChunk][j%lastChunk]
}

// maxDedupKeys is the most keys appendDedupKeys gives: the content, the
// row, and one message, entry and event it cites.
const maxDedupKeys = 5

type keptResult struct {
	res Result
	// keys are what appendDedupKeys gives for res, nkeys of them once a
	// search has needed them (0 before).
	keys  [maxDedupKeys]dedupKey
	nkeys int8
	size  int64
	used  uint64
}

// get returns the kept result of item k.
func (c *rowCache) get(k itemKey) (Result, bool) {
	if c == nil {
		return Result{}, false
	}
	i, ok := c.at[k]
	if !ok {
		return Result{}, false
	}
	e := c.slot(i)
	c.seq++
	e.used = c.seq
	return e.res, true
}

// appendDedupKeys appends the dedup keys of res, the result of item k, to
// dst, as the function appendDedupKeys makes them: kept in k's slot once
// made, when the cache keeps k.
func (c *rowCache) appendDedupKeys(dst []dedupKey, k itemKey, res *Result) []dedupKey {
	if c == nil {
		return appendDedupKeys(dst, res)
	}
	i, ok := c.at[k]
	if !ok {
		return appendDedupKeys(dst, res)
	}
	e := c.slot(i)
	if e.nkeys == 0 {
		e.nkeys = int8(len(appendDedupKeys(e.keys[:0], res)))
	}
	return append(dst, e.keys[:e.nkeys]...)
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
	if c.at == nil {
		c.at = map[itemKey]int32{}
	}
	size := resultBytes(&res)
	i, ok := c.at[k]
	if ok {
		c.bytes -= c.slot(i).size
	} else {
		if len(c.free) == 0 {
			// A new chunk, its slots taken lowest first.
			ch := len(c.chunks)
			c.chunks = append(c.chunks, make([]keptResult, chunkLen(ch)))
			for j := chunkStart(ch+1) - 1; j >= chunkStart(ch); j-- {
				c.free = append(c.free, int32(j))
			}
		}
		i = c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
		c.at[k] = i
	}
	*c.slot(i) = keptResult{res: res, size: size, used: used}
	c.bytes += size
	if c.size() > c.bound() {
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
// kept, the slots included, then moves the results left to the lowest
// slots and drops the chunks left empty (pack).
func (c *rowCache) shrink(n int64) {
	type use struct {
		k    itemKey
		used uint64
	}
	uses := make([]use, 0, len(c.at))
	for k, i := range c.at {
		uses = append(uses, use{k, c.slot(i).used})
	}
	sort.Slice(uses, func(i, j int) bool { return uses[i].used < uses[j].used })
	for _, u := range uses {
		if c.bytes+emptySlots(len(c.at))*slotBytes <= n {
			break
		}
		i := c.at[u.k]
		c.bytes -= c.slot(i).size
		*c.slot(i) = keptResult{}
		c.free = append(c.free, i)
		delete(c.at, u.k)
	}
	c.pack()
}

// slotBytes is what a slot takes.
const slotBytes = int64(unsafe.Sizeof(keptResult{}))

// emptySlots is the number of slots packed chunks leave empty beside n
// results.
func emptySlots(n int) int64 { return int64(chunkStart(chunksFor(n)) - n) }

// pack moves the kept results to the lowest slots and drops the chunks
// left empty.
func (c *rowCache) pack() {
	keep := chunksFor(len(c.at))
	limit := int32(chunkStart(keep))
	low := c.free[:0] // the empty slots below limit
	for _, i := range c.free {
		if i < limit {
			low = append(low, i)
		}
	}
	for k, i := range c.at {
		if i >= limit {
			j := low[len(low)-1]
			low = low[:len(low)-1]
			*c.slot(j), *c.slot(i) = *c.slot(i), keptResult{}
			c.at[k] = j
		}
	}
	clear(c.chunks[keep:])
	c.chunks, c.free = c.chunks[:keep], low
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

// keptBytes is what a kept result costs beside its text and sources: its
// slot (keptResult), its entry in rowCache.at and its sources' slices.
const keptBytes = slotBytes + 32

// putRead keeps res, a row just read from the database, and counts it.
func (c *rowCache) putRead(res Result) {
	if c == nil {
		return
	}
	c.reads++
	c.put(res)
}

// takeReads returns the rows read since it was last called.
func (c *rowCache) takeReads() int64 {
	n := c.reads
	c.reads = 0
	return n
}

// size is what c holds: its results, and the slots they left empty.
func (c *rowCache) size() int64 {
	if c == nil {
		return 0
	}
	return c.bytes + int64(len(c.free))*slotBytes
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
