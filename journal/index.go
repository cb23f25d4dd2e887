package journal

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/wordvec"
	"github.com/npcd/npcd/store"
)

// item is one searchable row of an NPC in the in-memory index: just what
// ranking needs. Content is read from the database only for the results.
type item struct {
	id       int64
	gameTime int64 // unix seconds on the game's clock
	supBy    int64 // memories: the memory that superseded this one; 0 when current
	kind     itemKind
	imp      int8
	user     bool  // a message of what the NPC perceived
	who      int32 // whom the item is by or about (see npcIndex.who), 0 for no one
}

type itemKey struct {
	kind itemKind
	id   int64
}

// npcIndex holds the decoded vectors and ranking metadata of one NPC's
// memories, journal entries and messages. Rows are only ever appended to
// messages and journal_entries, so new ones are found by id; memories
// change, so they are found by the NPC's memory revision. The index is
// guarded by mu, held for a whole search.
type npcIndex struct {
	mu    sync.Mutex
	npc   string
	dims  int
	items []item
	kinds [3]int // items per kind
	// vecs holds dims int8 codes per item, zero while an item waits for
	// its vector; vecScale, one per item, turns their dot product with the
	// query's codes into a cosine (see quantize): 0 for an item without a
	// vector or with a zero one.
	vecs     rowStore[int8]
	vecScale []float32
	vecTmp   []float32 // scratch for a vector on its way to codes (embedInPlace)
	// vecFrom is the first position whose vector vecs holds: the vectors
	// of older items are released once the index outgrows the cache's
	// budget (trimVectors), and those items are found by their words.
	// Memories keep theirs, in oldMems, for NearDuplicates and ranking.
	vecFrom int
	oldMems map[int32][]int8
	// packFrom is the first block of vecs packVectors has not looked at.
	packFrom int
	// byID lists, for journal entries and messages, their items in id
	// order (rows are appended with growing ids), so that position finds
	// one by binary search; memPos finds memories, whose ids come in no
	// order, and unordered any other item added out of id order. A map
	// entry per row would cost some 40 bytes of every row's 650.
	byID      [3][]int32
	memPos    map[int64]int32
	unordered map[itemKey]int32
	// users lists the items of perceived messages in id order, for the
	// neighbour bonus; userRank holds, for each item, its place in users,
	// -1 for an item that is no perceived message.
	users    []int32
	userRank []int32
	// mems lists the items of memories in the order they were added, for
	// NearDuplicates, which looks at no other kind.
	mems []int32
	// post numbers, for each indexed word (see termKey), its list in
	// lists: the items holding it, the NPC's own BM25 statistics and the
	// keyword channel's index (list finds one). The lists sit side by side
	// in blocks rather than each an object of its own: some 40 of them per
	// message, they were a tenth of what a collection traced in a world of
	// 1,000 NPCs. postingRoom is the bytes the lists' postings hold, growth
	// included; marks holds, by list number, the marks of the lists longer
	// than postSkip (postMark), for a bounded search, and markCount their
	// number.
	post        map[string]int32
	lists       [][]postList // in blocks (newList, listAt)
	postingRoom int
	marks       map[int32][]postMark
	markCount   int
	// family lists, for each morphological family (familyKey), the keys
	// of post in it, for query expansion.
	family map[string][]string
	// who numbers, from 1, the entities items are by or about, by the key
	// of their name's first word: the actor of a perceived message, the
	// entity of a memory.
	who      map[string]int32
	dl       []uint32 // length of each item in words
	totalLen int64
	kwScores []float32 // scratch for keyword scores, reused by each search
	// rs is the rank scratch a search borrows for its length (see
	// scratchList); nil between searches.
	rs      *rankScratch
	kwTops  [3]hitHeap // scratch for the keyword channel's best per kind
	touched []int32
	// pending are items still without a vector, with the text to embed.
	pending map[int32]string
	// pendingMost and semTextMost are the most entries pending and
	// semText held since they were made: a Go map keeps the room of the
	// most it held, so one that once held a build's worth is made anew
	// once it is empty (drained).
	pendingMost, semTextMost int
	lastMsg                  int64
	// floor is the NPC's floor when the index was made: it holds no
	// message or journal entry at or below it (see floorFor). rebuilding
	// is set once a new index of the NPC is being built above a higher
	// floor, to take this one's place (rebuild).
	floor      floorIDs
	rebuilding bool
	// histRev is the history revision the index holds every message of,
	// when histKnown (see Appended).
	histRev   int64
	histKnown bool
	lastEntry int64
	memRev    int64
	newest    int64 // newest game time of any item
	builtAt   time.Time
	// gameTime is the NPC's game clock as the last refresh read it.
	gameTime time.Time
	scores   []float32 // scratch for vector scores, reused by each search
	rows     rowCache  // messages recent searches showed
	// wv is the word vector table of the semantic channel, nil when it is
	// off; sem holds wv.Dims() int8 codes per item and semScale what turns
	// their dot product into a cosine (0 for an item without a known
	// word).
	wv        *wordvec.Table
	sem       rowStore[int8]
	semScale  []float32
	semScores []float32 // scratch for semantic scores, reused by each search
	semTmp    []float32
	// semText holds the text of the items whose sentence vector is not
	// computed yet: vectors are computed by the first semantic scan that
	// needs them (ensureSemantic), so an index built for anything else
	// (embedding, near duplicates) or searched with no known word never
	// pays for them.
	semText map[int32]string
	// sizeHint and usedHint are the size and last use recorded when the
	// index was last released; they are guarded by Retriever.mu, not mu.
	sizeHint int64
	usedHint time.Time
	// bound is the current search's bound on its work (SearchOptions.Window,
	// 0 for none; the scans start at scanStart); qv, the codes qc and scale
	// qcs scan made of it, semQ and semQS are the query vectors they used,
	// so ranking can score an older item a keyword hit brings (vecAt,
	// semAt).
	bound int
	qv    []float32
	qc    []int8
	qcs   float32
	// qbuf holds the query vector of a lexical embedder (queryVector).
	qbuf  []float32
	semQ  []int8
	semQS float32
	// qSparse is qc's nonzero codes when the scans use them (sparse): with
	// fewer than a third of qc's codes set. The codes' dot products are
	// sums of integers, the same in any order.
	qSparse sparse8
	sparse  bool
	// noVecPool is true while a search skips the vector scan
	// (vectorPoolNeeded): x.scores is then stale, and vecAt computes each
	// cosine.
	noVecPool bool
}

func newIndex(npc string) *npcIndex {
	return &npcIndex{npc: npc, semText: map[int32]string{}, memPos: map[int64]int32{}, pending: map[int32]string{}, post: map[string]int32{}, marks: map[int32][]postMark{}, family: map[string][]string{}, who: map[string]int32{}}
}

func (x *npcIndex) bytes() int64 {
	return x.vecs.bytes() + int64(cap(x.vecScale))*4 + int64(cap(x.vecTmp))*4 + int64(cap(x.qc)) + x.qSparse.bytes() +
		int64(cap(x.items))*int64(unsafe.Sizeof(item{})) + int64(cap(x.byID[kindJournal])+cap(x.byID[kindMessage]))*4 + int64(len(x.memPos)+len(x.unordered))*40 + int64(cap(x.scores))*4 +
		int64(cap(x.kwScores))*4 + int64(cap(x.qbuf))*4 + int64(cap(x.dl))*4 + int64(cap(x.userRank))*4 + int64(cap(x.mems))*4 + int64(x.postingRoom) + int64(len(x.post))*termBytes + int64(x.markCount)*12 + int64(len(x.marks))*48 + int64(cap(x.touched))*4 + int64(len(x.family))*familyBytes + int64(len(x.who))*40 +
		x.sem.bytes() + int64(cap(x.semScale))*4 + int64(cap(x.semScores))*4 + x.rows.size() + waitingBytes(x.semText) + waitingBytes(x.pending) +
		int64(cap(x.kwTops[0])+cap(x.kwTops[1])+cap(x.kwTops[2]))*24 + int64(len(x.oldMems))*(int64(x.dims)+oldMemOverhead)
}

// termBytes is what a term costs an index beside its postings: its entry
// in npcIndex.post, its key and its list's place in npcIndex.lists (the
// room the last block of lists keeps, at most a block, is not counted);
// familyBytes is what a family listed in npcIndex.family costs (its entry,
// its key and its list of keys).
const (
	termBytes   = 96
	familyBytes = 128
)

// waitingBytes is what the texts of items waiting for a vector (pending,
// semText) hold: each text and its map entry.
func waitingBytes(m map[int32]string) int64 {
	n := int64(0)
	for _, s := range m {
		n += int64(len(s)) + 24
	}
	return n
}

// await records that item p waits for its vector, to be embedded from
// text.
func (x *npcIndex) await(p int32, text string) {
	x.pending[p] = text
	x.pendingMost = max(x.pendingMost, len(x.pending))
}

// drained returns m, a map of items waiting for a vector that once held
// most entries, as it should be kept: a new map when it is empty and once
// held more than drainedRoom entries (a build's worth), else m itself.
func drained(m map[int32]string, most int) (map[int32]string, int) {
	if len(m) == 0 && most > drainedRoom {
		return map[int32]string{}, 0
	}
	return m, most
}

// drainedRoom is how many entries a map of waiting items may once have
// held and still be kept once empty: the few a tick adds, not a build's.
const drainedRoom = 256

// oldMemOverhead is what oldMems costs per memory beside its codes: the
// map entry and the slice header.
const oldMemOverhead = 48

// minVectorRows is how many of its newest items an index always holds the
// vectors of, whatever its budget: more than a tick's bounded search scans
// (tick.RecallWindow).
const minVectorRows = 4096

// vecRow returns item p's vector codes for writing, nil when they were
// released; a packed block is held whole again first (unpackBlock).
func (x *npcIndex) vecRow(p int) []int8 {
	if p >= x.vecFrom {
		if x.vecs.packedAt(p) != nil {
			unpackBlock(&x.vecs, p/blockRows)
			x.packFrom = min(x.packFrom, p/blockRows) // to be packed again
		}
		return x.vecs.row(p)
	}
	return x.oldMems[int32(p)]
}

// packVectors packs the blocks of vectors that are full and wait for no
// vector (packBlock): once the cache has outgrown its budget, an index
// holds its vectors this way rather than be dropped (Retriever.release).
// The scans read a packed row's codes set (dotRun) and give the same
// products. It returns the bytes freed.
// Each block is looked at once: packFrom is the first block not yet
// packed or found too dense to pack. A block with an item waiting for its
// vector stops the pass, until a later one.
func (x *npcIndex) packVectors() int64 {
	d := x.dims
	full := len(x.items) / blockRows
	from := max(x.packFrom, x.vecFrom/blockRows)
	if d == 0 || d > maxPackedDims || full <= from {
		return 0
	}
	stop := full
	for p := range x.pending {
		stop = min(stop, int(p)/blockRows)
	}
	var freed int64
	for b := from; b < stop; b++ {
		if x.vecs.packedAt(b*blockRows) == nil {
			freed += packBlock(&x.vecs, b)
		}
	}
	x.packFrom = max(from, stop)
	return freed
}

// trimVectors releases the vectors of the index's oldest items, a block of
// the store at a time, while the index (of size bytes) holds more than
// limit, down to three quarters of it, so that it does not trim again at
// every new row. The vectors are the largest part of an index (256 bytes
// of some 600 a row at 256 dimensions); the items keep their words,
// postings and sentence vectors, so the keyword and semantic channels
// still find them, and memories keep their vectors. The newest
// minVectorRows items are never trimmed. It reports whether it released
// any.
func (x *npcIndex) trimVectors(size, limit int64) bool {
	if limit <= 0 || size <= limit || x.dims == 0 {
		return false
	}
	from := x.vecFrom
	goal := size - limit*3/4
	keep := len(x.items) - minVectorRows
	var freed int64
	for b := x.vecFrom / blockRows; (b+1)*blockRows <= keep && freed < goal; b++ {
		lo, hi := b*blockRows, (b+1)*blockRows
		for p := lo; p < hi; p++ {
			if x.items[p].kind == kindMemory {
				if x.oldMems == nil {
					x.oldMems = map[int32][]int8{}
				}
				x.oldMems[int32(p)] = readRow(&x.vecs, p, make([]int8, x.dims))
				freed -= int64(x.dims) + oldMemOverhead
				continue // one still waiting for its vector gets it in oldMems
			}
			delete(x.pending, int32(p))
		}
		x.pending, x.pendingMost = drained(x.pending, x.pendingMost)
		freed += x.vecs.release(b)
		x.vecFrom = hi
	}
	return x.vecFrom != from
}

// place records that item it is at position p, for position.
func (x *npcIndex) place(it item, p int32) {
	if it.kind == kindMemory {
		x.memPos[it.id] = p
		return
	}
	list := x.byID[it.kind]
	if n := len(list); n > 0 && x.items[list[n-1]].id >= it.id {
		if x.unordered == nil {
			x.unordered = map[itemKey]int32{}
		}
		x.unordered[itemKey{it.kind, it.id}] = p
		return
	}
	x.byID[it.kind] = append(list, p)
}

// position returns the position of the item of kind with id, if indexed.
func (x *npcIndex) position(kind itemKind, id int64) (int32, bool) {
	if kind == kindMemory {
		p, ok := x.memPos[id]
		return p, ok
	}
	list := x.byID[kind]
	i := sort.Search(len(list), func(i int) bool { return x.items[list[i]].id >= id })
	if i < len(list) && x.items[list[i]].id == id {
		return list[i], true
	}
	p, ok := x.unordered[itemKey{kind, id}]
	return p, ok
}

// whoID numbers the entity whose name is name (by its first word), 0 for
// no name.
func (x *npcIndex) whoID(name string) int32 {
	ws := ftsWords(name)
	if len(ws) == 0 || !searchable(ws[0]) {
		return 0
	}
	k := termKey(ws[0])
	id, ok := x.who[k]
	if !ok {
		id = int32(len(x.who) + 1)
		x.who[strings.Clone(k)] = id // not the text k is a slice of
	}
	return id
}

// named returns the entities a query's terms name.
func (x *npcIndex) named(terms []string) map[int32]bool {
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

// actorOf returns the first word of who acts in a perceived line ("Bob
// says: …", "Bob arrives", "Bob [trade]: …"), which the tick writes first.
// Narration and the NPC's own acts, written in parentheses, have no actor.
func actorOf(text string) string {
	if text == "" || text[0] == '(' {
		return ""
	}
	name, _, ok := strings.Cut(text, " ")
	if !ok {
		return ""
	}
	return name
}

// add appends an item with its text and returns its position.
func (x *npcIndex) add(it item, text string) int32 {
	p := int32(len(x.items))
	words := ftsWords(text)
	x.addPostings(p, words)
	if x.wv != nil {
		x.semText[p] = text // its sentence vector waits for a semantic scan
		x.semTextMost = max(x.semTextMost, len(x.semText))
	}
	x.items = append(x.items, it)
	x.kinds[it.kind]++
	if x.dims > 0 {
		x.vecs.grow(1)
	}
	x.vecScale = append(x.vecScale, 0)
	x.place(it, p)
	rank := int32(-1)
	if it.user {
		rank = int32(len(x.users))
		x.users = append(x.users, p)
	}
	x.userRank = append(x.userRank, rank)
	if it.kind == kindMemory {
		x.mems = append(x.mems, p)
	}
	if it.gameTime > x.newest {
		x.newest = it.gameTime
	}
	return p
}

// setDims fixes the index's vector dimensions at d: every item gets a
// zero row, its vector to come.
func (x *npcIndex) setDims(d int) {
	x.dims = d
	x.vecs.reset(d)
	x.vecs.grow(len(x.items))
}

// setVec stores the vector of item p, fixing the index's dimension count on
// the first vector.
func (x *npcIndex) setVec(p int32, v []float32) error {
	if x.dims == 0 {
		if len(v) == 0 {
			return fmt.Errorf("%w: empty vector", ErrEmbedding)
		}
		x.setDims(len(v))
	}
	if len(v) != x.dims {
		return fmt.Errorf("%w: vector of %d dimensions, the index holds %d", ErrEmbedding, len(v), x.dims)
	}
	delete(x.pending, p)
	x.pending, x.pendingMost = drained(x.pending, x.pendingMost)
	row := x.vecRow(int(p))
	if row == nil {
		if x.items[p].kind != kindMemory {
			return nil // its vector was released (trimVectors)
		}
		row = make([]int8, x.dims)
		x.oldMems[p] = row
	}
	x.vecScale[p] = quantize(row, v)
	return nil
}

// embedInPlace gives the items of ps that are no memories their vectors,
// written by the embedder into the index's scratch and stored from there,
// when it is a local lexical one (weightedEmbedder); the first vector of a
// new index fixes its dimension count (setVec). It returns the items left.
// Through Embed each vector would be allocated, a whole index's at its
// first search. Memories keep the usual path: their vectors
// are also stored with them.
func (r *Retriever) embedInPlace(ctx context.Context, x *npcIndex, ps []int32) ([]int32, error) {
	we, ok := r.embedder.(weightedEmbedder)
	if !ok {
		return ps, nil
	}
	rest := ps[:0]
	for i, p := range ps {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrEmbedding, err)
			}
		}
		if x.items[p].kind == kindMemory {
			rest = append(rest, p)
			continue
		}
		v := we.AppendWeightedVector(x.vecTmp[:0], x.pending[p], nil)
		x.vecTmp = v
		if err := x.setVec(p, v); err != nil {
			return nil, err
		}
	}
	return rest, nil
}

// refresh brings the index up to date with the database: new messages and
// journal entries, new and changed memories. It reports errReset when the
// NPC's rows were deleted under it; the caller starts a new index.
func (r *Retriever) refresh(ctx context.Context, x *npcIndex) error {
	return r.refreshAt(ctx, x, nil)
}

// refreshAt is refresh reading nothing when the marks m are set and the
// index is at them: every message of their history revision, every
// memory of their memory revision and no journal entry above their
// newest. Only the clock is then new.
func (r *Retriever) refreshAt(ctx context.Context, x *npcIndex, m *Marks) error {
	if m != nil && x.histKnown && x.histRev == m.HistoryRev && x.memRev == m.MemoryRev && x.lastEntry == m.NewestEntry {
		x.gameTime = m.GameTime
		return nil
	}
	// One statement tells what else changed and reads the new journal
	// entries: the NPC's clock, its history and memory revisions, and its
	// entries above the newest indexed. Most searches read nothing more.
	// It runs before the messages are read: the history revision it reads
	// is then one they are at least as new as.
	rows, err := r.store.hotQuery(ctx, r.store.sqliteText(marksSQLite, marksSQL), x.npc, x.npc, x.npc, x.lastEntry)
	if err != nil {
		return fmt.Errorf("index %q: %w", x.npc, err)
	}
	defer rows.Close()
	var (
		gameTime, entryTime sql.NullTime
		rev                 int64
		histRev             sql.NullInt64
		id, importance      sql.NullInt64
		content             sql.NullString
		sources             []byte
		es                  []newEntry
		marked              bool
	)
	for rows.Next() {
		if err := rows.Scan(store.NullTimeText{T: &gameTime}, &histRev, &rev, &id, &content, &importance, store.NullTimeText{T: &entryTime},
			&sources); err != nil {
			return fmt.Errorf("index %q: %w", x.npc, err)
		}
		marked = true
		if id.Valid {
			es = append(es, newEntry{id: id.Int64, content: content.String, importance: int(importance.Int64), gameTime: entryTime.Time, sources: sources})
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("index %q: %w", x.npc, err)
	}
	if !marked {
		return fmt.Errorf("index %q: %w", x.npc, sql.ErrNoRows)
	}
	rows.Close()
	// The messages are read unless the history is at the revision the
	// index holds every message of (see Appended).
	if !histRev.Valid || !x.histKnown || histRev.Int64 != x.histRev {
		x.histKnown = false
		if err := r.loadMessages(ctx, x); err != nil {
			return err
		}
		x.histRev, x.histKnown = histRev.Int64, histRev.Valid
	}
	x.gameTime = gameTime.Time
	r.indexEntries(x, es)
	return r.loadMemories(ctx, x, rev)
}

// Appended tells the retriever that the live history of NPC npc, stored at
// revision held, was moved to revision rev by appending msgs (as stored,
// with their ids) and by nothing else: the caller knows no other write
// came between. When the NPC's index holds every message of revision held,
// it indexes msgs from memory and holds revision rev, so that the next
// search does not read them back. Otherwise it does nothing and the next
// search reads what is new from the database, as always.
func (r *Retriever) Appended(npc string, held, rev int64, msgs []*character.Message) {
	x := r.lockedIndex(npc)
	if x == nil {
		return
	}
	defer x.mu.Unlock()
	if !x.histKnown || x.histRev != held {
		return
	}
	var ms []msg
	for _, m := range msgs {
		// As the query reads them: searchable rows only, and none a
		// search read meanwhile.
		if m.ID <= x.lastMsg || m.Summary || m.Content == "" || (m.State != character.StateLive && m.State != character.StateArchived) ||
			!slices.Contains(searchableRoles, m.Role) {
			continue
		}
		ms = append(ms, msg{ID: m.ID, Role: m.Role, Content: m.Content, GameTime: m.GameTime, refs: m.EventRefs.V, decoded: true})
	}
	r.indexMessages(x, ms)
	r.keepMessages(x, nil, ms)
	x.histRev = rev
}

// lockedIndex returns NPC npc's index in the cache, locked, or nil when
// the cache holds none.
func (r *Retriever) lockedIndex(npc string) *npcIndex {
	r.mu.Lock()
	x, ok := r.npcs[npc]
	r.mu.Unlock()
	if !ok {
		return nil
	}
	x.mu.Lock()
	return x
}

// AppendedEntries tells the retriever that entries (as stored, with their
// ids, in id order) were added to NPC npc's journal right after its entry
// prev and with nothing else between (see Store.AddFollowing; prev is
// negative when unknown). When the NPC's index holds its entries up to
// prev, it indexes entries from memory, so that the next search does not
// read them back. Otherwise it does nothing and the next search reads what
// is new from the database, as always.
func (r *Retriever) AppendedEntries(npc string, prev int64, entries []*Entry) {
	if prev < 0 || len(entries) == 0 {
		return
	}
	x := r.lockedIndex(npc)
	if x == nil {
		return
	}
	defer x.mu.Unlock()
	if x.lastEntry != prev {
		return
	}
	es := make([]newEntry, len(entries))
	for i, e := range entries {
		es[i] = newEntry{id: e.ID, content: e.Content, importance: e.Importance, gameTime: e.GameTime, src: &e.Sources.V}
	}
	r.indexEntries(x, es)
}

// newEntry is a journal entry a refresh found.
type newEntry struct {
	id         int64
	content    string
	importance int
	gameTime   time.Time
	sources    []byte
	// src, when set, is sources decoded (an entry written through).
	src *character.Sources
}

// indexEntries indexes the NPC's new journal entries, es, in id order.
func (r *Retriever) indexEntries(x *npcIndex, es []newEntry) {
	texts := make([]string, len(es))
	for i, e := range es {
		texts[i] = unstamped(e.content)
		p := x.add(item{id: e.id, kind: kindJournal, gameTime: e.gameTime.Unix(), imp: int8(e.importance)}, texts[i])
		x.await(p, texts[i])
		x.lastEntry = e.id
	}
	// As with messages, the newest entries are kept for the results.
	x.rows.keepNewest(len(es), r.cfg.keepBytes, func(i int) (Result, error) {
		e := es[i]
		if e.src != nil {
			return entryResult(e.id, texts[i], *e.src, e.gameTime, e.importance), nil
		}
		var src store.JSON[character.Sources]
		if err := src.Scan(e.sources); err != nil {
			return Result{}, fmt.Errorf("index journal of %q: sources of %d: %w", x.npc, e.id, err)
		}
		return entryResult(e.id, texts[i], src.V, e.gameTime, e.importance), nil
	})
}

// marksSQL reads, for refresh, an NPC's game clock and history revision
// (NULL when it has no row), its memory revision (0 before its first
// memory) and its journal entries above an id, in id order: a row per
// entry, each with the clock and revisions, or one row with NULL entry
// columns when there is none.
const marksSQL = `SELECT characters.game_time, characters.history_rev,
	COALESCE((SELECT rev FROM memory_revs WHERE memory_revs.character_id = ?), 0),
	entries.id, entries.content, entries.importance, entries.game_time, entries.sources
	FROM (SELECT 1 AS one) AS one LEFT JOIN characters ON characters.id = ?
	LEFT JOIN entries ON entries.character_id = ? AND entries.id > ?
	ORDER BY entries.id`

// marksSQLite is marksSQL on SQLite, the times read as text (see
// store.TimeText).
var marksSQLite = store.TimesAsText(marksSQL, "characters.game_time", "entries.game_time")

// searchableAbove selects an NPC's searchable messages above an id, with
// searchableArgs. state IN (...) lets SQLite seek the (character_id,
// state, id) index for both states instead of walking every row of the NPC.
const searchableAbove = `character_id = ? AND state IN (?, ?) AND id > ? AND summary = ? AND content <> '' AND role IN (?, ?, ?)`

// searchableArgs returns the arguments of searchableAbove for NPC npc's
// messages above id, followed by more.
func searchableArgs(npc string, id int64, more ...any) []any {
	args := make([]any, 0, 5+len(searchableRoles)+len(more))
	args = append(args, npc, character.StateLive, character.StateArchived, id, false)
	for _, role := range searchableRoles {
		args = append(args, role)
	}
	return append(args, more...)
}

// newMessagesSQL reads an NPC's searchable messages above an id.
const newMessagesSQL = `SELECT id, role, content, game_time, event_refs FROM messages WHERE ` + searchableAbove + ` ORDER BY id`

// newMessagesSQLite is newMessagesSQL on SQLite, the time read as text (see
// store.TimeText).
var newMessagesSQLite = store.TimesAsText(newMessagesSQL, "game_time")

func (r *Retriever) loadMessages(ctx context.Context, x *npcIndex) error {
	rows, err := r.store.hotQuery(ctx, r.store.sqliteText(newMessagesSQLite, newMessagesSQL), searchableArgs(x.npc, x.lastMsg)...)
	if err != nil {
		return fmt.Errorf("index messages of %q: %w", x.npc, err)
	}
	defer rows.Close()
	// The rows are indexed a chunk at a time, and the last two chunks
	// read are kept for keepMessages.
	var prev, cur []msg
	for rows.Next() {
		var m msg
		if err := rows.Scan(&m.ID, &m.Role, &m.Content, store.TimeText{T: &m.GameTime}, &m.rawRefs); err != nil {
			return fmt.Errorf("index messages of %q: %w", x.npc, err)
		}
		cur = append(cur, m)
		if len(cur) == loadChunk {
			r.indexMessages(x, cur)
			size := r.settle(x)
			if floor, keep, ok := r.floorFor(x, size); ok {
				rows.Close() // before outgrown's read, which may need its connection
				return r.outgrown(ctx, x, floor, keep, size)
			}
			prev, cur = cur, prev[:0]
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("index messages of %q: %w", x.npc, err)
	}
	r.indexMessages(x, cur)
	r.keepMessages(x, prev, cur)
	return nil
}

// loadChunk is how many messages a refresh reads and indexes at a time.
// Between chunks the index is settled (settle), so building the index of
// an NPC with a long past holds one chunk of its rows and keeps within the
// cache's budget as it goes, instead of holding all its rows, their texts
// and their vectors at once before trimming them.
const loadChunk = 2048

// settle brings x, in the middle of a build, to what searches would leave
// it: the sentence vectors of its new items made, which frees their texts
// (ensureSemantic; a build for near duplicates alone then makes them too,
// where holding every text until a search would hold the NPC's whole
// past), and, once it knows the embedder's dimensions (vectorDims), the
// vectors of its oldest items released while it outgrows the cache's
// budget (trimVectors), with their texts waiting for a vector. It returns
// x's size after.
func (r *Retriever) settle(x *npcIndex) int64 {
	x.ensureSemantic()
	if x.dims == 0 {
		if d := r.vectorDims(); d > 0 {
			x.setDims(d)
		}
	}
	return r.trim(x, x.bytes())
}

// msg is a searchable message to index: read from the database, its event
// refs still JSON (rawRefs), or given by Appended, decoded.
type msg struct {
	ID       int64
	Role     string
	Content  string
	GameTime time.Time
	rawRefs  []byte
	refs     []string
	decoded  bool
}

// indexMessages indexes msgs, new messages of x's NPC in id order.
func (r *Retriever) indexMessages(x *npcIndex, msgs []msg) {
	for _, m := range msgs {
		text := unstamped(m.Content)
		it := item{id: m.ID, kind: kindMessage, gameTime: m.GameTime.Unix(), imp: int8(Importance("", m.Content)), user: m.Role == "user"}
		if it.user {
			it.who = x.whoID(actorOf(text))
		}
		p := x.add(it, text)
		x.await(p, text)
		x.lastMsg = m.ID
	}
}

// keepMessages keeps the results of the newest of the messages x just
// indexed, older then newer, in id order: the newest messages are what the
// next searches show most, and with their results kept those searches
// need not read them.
func (r *Retriever) keepMessages(x *npcIndex, older, newer []msg) {
	x.rows.keepNewest(len(older)+len(newer), r.cfg.keepBytes, func(i int) (Result, error) {
		var m *msg
		if i < len(older) {
			m = &older[i]
		} else {
			m = &newer[i-len(older)]
		}
		refs := m.refs
		if !m.decoded {
			var js store.JSON[[]string]
			if err := js.Scan(m.rawRefs); err != nil {
				return Result{}, fmt.Errorf("index messages of %q: event refs of %d: %w", x.npc, m.ID, err)
			}
			refs = js.V
		}
		return messageResult(m.ID, m.Content, unstamped(m.Content), refs, m.GameTime), nil
	})
}

// searchableRoles are the message roles retrieval indexes: what the NPC
// perceived, what it said in free text, and what game tools returned.
var searchableRoles = []string{"user", "assistant", "tool"}

// loadMemories brings the index's memories up to rev, the NPC's memory
// revision.
func (r *Retriever) loadMemories(ctx context.Context, x *npcIndex, rev int64) error {
	switch {
	case rev < x.memRev:
		return errReset // the NPC's memories were deleted since the index was built
	case rev == x.memRev:
		return nil
	}
	rows, err := r.store.hotQuery(ctx, r.store.sqliteText(newMemoriesSQLite, newMemoriesSQL), x.npc, x.memRev)
	if err != nil {
		return fmt.Errorf("index memories of %q: %w", x.npc, err)
	}
	defer rows.Close()
	var (
		id            int64
		content       string
		entity, model sql.NullString
		importance    int
		gameTime      time.Time
		supersededBy  sql.NullInt64
		embedding     sql.RawBytes
	)
	for rows.Next() {
		if err := rows.Scan(&id, &content, &entity, &importance, store.TimeText{T: &gameTime}, &supersededBy, &embedding, &model); err != nil {
			return fmt.Errorf("index memories of %q: %w", x.npc, err)
		}
		sup := supersededBy.Int64
		if p, ok := x.memPos[id]; ok {
			x.items[p].supBy = sup // content never changes; supersession does
			continue
		}
		p := x.add(item{id: id, kind: kindMemory, gameTime: gameTime.Unix(), imp: int8(importance), supBy: sup, who: x.whoID(entity.String)}, content)
		if model.String == r.model && len(embedding) > 0 && (x.dims == 0 || len(embedding) == 4*x.dims) {
			v, err := DecodeVector(embedding)
			if err == nil {
				if err := x.setVec(p, v); err == nil {
					continue
				}
			}
		}
		x.await(p, content)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("index memories of %q: %w", x.npc, err)
	}
	x.memRev = rev
	return nil
}

// localEmbedder is an embedder that computes vectors in process, faster
// than the database returns them (llm.OfflineEmbedder).
type localEmbedder interface {
	Local() bool
}

// persists reports whether vectors of the retriever's embedder go to the
// embeddings table. A local embedder's would only grow the database (a
// kilobyte per message) to save microseconds; memories keep their vector in
// their own row either way.
func (r *Retriever) persists() bool {
	l, ok := r.embedder.(localEmbedder)
	return !ok || !l.Local()
}

// embedPending gives vectors to items that wait for one: from the embedding
// cache when the text was embedded before, else from the embedder, at most
// limit texts per call (the rest wait for a later search; a local embedder
// has no limit). query, when not empty, is embedded in the same call and its
// vector returned, so a search costs at most one embedder round trip.
func (r *Retriever) embedPending(ctx context.Context, x *npcIndex, query string, limit int) ([]float32, error) {
	ps := make([]int32, 0, len(x.pending))
	for p := range x.pending {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	persist := r.persists()
	if !persist {
		limit = len(ps)
	}
	if len(ps) > 0 && persist {
		hashes := make([]string, len(ps))
		for i, p := range ps {
			hashes[i] = textHash(x.pending[p])
		}
		cached, err := r.store.cachedVectors(ctx, r.model, hashes)
		if err != nil {
			return nil, err
		}
		var memIDs []int64
		var memVecs [][]float32
		rest := ps[:0]
		for i, p := range ps {
			v, ok := cached[hashes[i]]
			if !ok || (x.dims > 0 && len(v) != x.dims) {
				rest = append(rest, p)
				continue
			}
			if err := x.setVec(p, v); err != nil {
				return nil, err
			}
			if it := x.items[p]; it.kind == kindMemory {
				memIDs, memVecs = append(memIDs, it.id), append(memVecs, v)
			}
		}
		if len(memIDs) > 0 {
			r.persist(r.store.setMemoryEmbeddings(ctx, memIDs, memVecs, r.model), "store memory embeddings")
		}
		ps = rest
	}
	if len(ps) > limit {
		ps = ps[:limit]
	}
	if !persist {
		var err error
		if ps, err = r.embedInPlace(ctx, x, ps); err != nil {
			return nil, err
		}
	}
	texts := make([]string, 0, len(ps)+1)
	if query != "" {
		texts = append(texts, query)
	}
	for _, p := range ps {
		texts = append(texts, x.pending[p])
	}
	if len(texts) == 0 {
		return nil, nil
	}
	vecs, err := r.embedder.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEmbedding, err)
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("%w: %d vectors for %d texts", ErrEmbedding, len(vecs), len(texts))
	}
	var qv []float32
	if query != "" {
		qv, vecs = vecs[0], vecs[1:]
		unit(qv)
	}
	hashes := make([]string, len(ps))
	var memIDs []int64
	var memVecs [][]float32
	for i, p := range ps {
		if persist {
			hashes[i] = textHash(x.pending[p])
		}
		if err := x.setVec(p, vecs[i]); err != nil {
			return nil, err
		}
		if it := x.items[p]; it.kind == kindMemory {
			memIDs, memVecs = append(memIDs, it.id), append(memVecs, vecs[i])
		}
	}
	if persist {
		r.persist(r.store.cacheVectors(ctx, r.model, hashes, vecs), "cache embeddings")
	}
	if len(memIDs) > 0 {
		r.persist(r.store.setMemoryEmbeddings(ctx, memIDs, memVecs, r.model), "store memory embeddings")
	}
	if qv != nil && x.dims > 0 && len(qv) != x.dims {
		return nil, fmt.Errorf("%w: query vector of %d dimensions, the index holds %d", ErrEmbedding, len(qv), x.dims)
	}
	return qv, nil
}

// unstamped is content without the game-time stamps the tick puts at the
// head of each perceived line ("[2026-11-21 10:02] ", seconds optional,
// and the blanks after it). Results carry their game time apart, and every
// consumer prints it, so a stamp would be paid for twice in a prompt; and to
// a lexical embedder the digits of a stamp would make every line of one day
// look alike. It reads content once, and copies it only when text comes
// before a stamp: without one, or with stamps only at its head (a perceived
// line, most often), it is content or the end of it, sharing its bytes.
func unstamped(content string) string {
	if !strings.HasPrefix(content, "[") && !strings.Contains(content, "\n[") {
		return content
	}
	var b strings.Builder
	copied := 0 // content[:copied] is in b, without its stamps
	for i := 0; i < len(content); {
		// i is at the start of a line.
		if n := stampLen(content[i:]); n > 0 {
			b.WriteString(content[copied:i])
			j := i + n
			for j < len(content) && isStampBlank(content[j]) {
				j++
			}
			copied, i = j, j
			if content[j-1] == '\n' {
				continue // the blanks ended a line: i starts the next
			}
		}
		k := strings.IndexByte(content[i:], '\n')
		if k < 0 {
			break
		}
		i += k + 1
	}
	if b.Len() == 0 {
		return content[copied:]
	}
	b.WriteString(content[copied:])
	return b.String()
}

// stampLen is the length of the game-time stamp s starts with
// ("[2026-11-21 10:02]", "[2026-11-21T10:02:05]"), 0 when it starts with
// none.
func stampLen(s string) int {
	const short = len("[2026-11-21 10:02]")
	if len(s) < short || s[0] != '[' {
		return 0
	}
	for i, c := range []byte(s[1 : short-1]) {
		var ok bool
		switch i {
		case 4, 7:
			ok = c == '-'
		case 10:
			ok = c == ' ' || c == 'T'
		case 13:
			ok = c == ':'
		default:
			ok = c >= '0' && c <= '9'
		}
		if !ok {
			return 0
		}
	}
	switch {
	case s[short-1] == ']':
		return short
	case len(s) >= short+3 && s[short-1] == ':' && isDigit(s[short]) && isDigit(s[short+1]) && s[short+2] == ']':
		return short + 3
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isStampBlank reports whether c is a blank that follows a stamp: a space,
// tab, line break or form feed.
func isStampBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
}

// idf is the inverse document frequency of term among the NPC's items, as
// BM25 computes it; 0 for a stop word.
func (x *npcIndex) idf(term string) float64 {
	if stopWords[term] {
		return 0
	}
	n, d := float64(len(x.items)), float64(x.df(term))
	return math.Log(1 + (n-d+0.5)/(d+0.5))
}

// persist reports a failed write of vectors a search made. Those writes only
// save recomputing the vectors later (the search itself has them in memory),
// so they never fail a search — which also keeps searches working on a
// read-only database, as aihistory --db opens it.
func (r *Retriever) persist(err error, what string) {
	if err != nil {
		r.log.Warn().Err(err).Msg(what)
	}
}
