package journal

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
)

// window says how collect joins results that come from neighbouring
// perceived messages. The zero window joins nothing.
type window struct {
	// rank returns the place of a perceived message among the NPC's
	// perceived messages, in order; false for any other message.
	rank func(msgID int64) (int32, bool)
	// span is how far apart (in perceived messages) two results may be to
	// join, and parts how many messages one result may hold.
	span, parts int
	// reach is the share of the k-th result's score a candidate needs to
	// join a result once k results are taken.
	reach float64
}

// part is one row's text within a result, with the sources behind it.
type part struct {
	rank    int32 // place among perceived messages; -1 when not one
	text    string
	sources character.Sources
}

// group is a result being built: its parts in the order they were joined.
type group struct {
	res   *Result
	parts []part
	// first holds the first parts, so that a result of one or two parts
	// costs no allocation of its own.
	first [2]part
}

// newGroup returns a group of res with its first part p, in buf's array,
// which grows into a new one when full (the groups given before stay
// where they are).
func newGroup(buf *[]group, res *Result, p part) *group {
	if len(*buf) == cap(*buf) {
		*buf = make([]group, 0, max(8, 2*cap(*buf)))
	}
	*buf = append(*buf, group{res: res})
	g := &(*buf)[len(*buf)-1]
	g.first[0] = p
	g.parts = g.first[:1]
	return g
}

// partSlot is one part of a group.
type partSlot struct {
	g *group
	i int // the part
}

// collectScratch holds the maps collect fills. They are pooled, not made
// again each search: as many exist as searches run at once, whatever the
// number of NPCs.
type collectScratch struct {
	byKey  map[dedupKey]partSlot
	byRank map[int32]*group
	loaded map[itemKey]*Result
	// results holds the rows loaded, which loaded points into (keepResult);
	// groups the groups built (newGroup).
	results []Result
	groups  []group
	keys    []dedupKey // a result's dedup keys
}

var collectScratches = sync.Pool{New: func() any {
	return &collectScratch{byKey: map[dedupKey]partSlot{}, byRank: map[int32]*group{}, loaded: map[itemKey]*Result{}}
}}

// getScratch returns empty collect maps from the pool.
func getScratch() *collectScratch { return collectScratches.Get().(*collectScratch) }

// put empties sc and returns it to the pool. Maps grown past a search of
// MaxK results are dropped instead.
func (sc *collectScratch) put() {
	if len(sc.byKey) > 8*MaxK || cap(sc.results) > 8*MaxK || cap(sc.groups) > 8*MaxK {
		return
	}
	clear(sc.byKey)
	clear(sc.byRank)
	clear(sc.loaded)
	clear(sc.results)
	sc.results = sc.results[:0]
	clear(sc.groups)
	sc.groups = sc.groups[:0]
	collectScratches.Put(sc)
}

// keepResult returns a pointer to a copy of res: in buf's array, which
// grows into a new one when full (the results given before stay where
// they are), or on its own with buf nil.
func keepResult(buf *[]Result, res Result) *Result {
	if buf == nil {
		p := new(Result)
		*p = res
		return p
	}
	if len(*buf) == cap(*buf) {
		*buf = make([]Result, 0, max(16, 2*cap(*buf)))
	}
	*buf = append(*buf, res)
	return &(*buf)[len(*buf)-1]
}

// collect turns ranked candidates into up to k results, best first. It reads
// their rows in small batches and merges results that come from the same
// single message or game event (a message, the journal entry written from
// it, a memory restating it) or that say the same thing (equal normalized
// content): the best one stays, citing the sources of all. It reports
// whether a ranked row no longer exists.
//
// With a window, a candidate from a perceived message next to one a result
// already holds joins that result as another part instead of taking a place
// of its own: a question and its reply, or consecutive turns, come back as
// one result, in the order they happened. Candidates below the k-th result
// still join, down to w.reach of its score.
//
// Contents longer than maxBytes (when > 0) are cut to a snippet around the
// query's terms, and a result cites only the parts whose text it keeps.
// Without parts, results leave Parts nil. Messages of live, the NPC's live
// history as the caller holds it, are not read (see load).
func (s *Store) collect(ctx context.Context, npc string, ranked []candidate, k int, terms []string, maxBytes int, w window, cache *rowCache, live []character.Message, parts bool) ([]Result, bool, error) {
	var out []*group
	sc := getScratch()
	defer sc.put()
	byKey, byRank := sc.byKey, sc.byRank
	missing := false
	floor := -1.0
	for start := 0; start < len(ranked); {
		if len(out) == k {
			if floor < 0 {
				floor = out[k-1].res.Score * w.reach
			}
			if w.rank == nil || ranked[start].score < floor || ranked[start].score <= 0 {
				break
			}
		}
		end := min(len(ranked), start+2*max(k-len(out), 1)+8)
		batch := ranked[start:end]
		start = end
		if len(out) == k {
			// Only a perceived message next to a result can still join
			// one; nothing else is worth reading.
			var near []candidate
			for _, c := range batch {
				if c.score < floor {
					start = len(ranked)
					break
				}
				if c.kind != kindMessage {
					continue
				}
				if rank, ok := w.rank(c.id); ok && w.near(byRank, rank) != nil {
					near = append(near, c)
				}
			}
			if batch = near; len(batch) == 0 {
				continue
			}
		}
		rows := sc.loaded
		if err := s.load(ctx, npc, batch, cache, live, rows, &sc.results); err != nil {
			return nil, false, err
		}
		for _, c := range batch {
			res, ok := rows[itemKey{c.kind, c.id}]
			if !ok {
				missing = true
				continue
			}
			res.Score = c.score
			if parts {
				res.Parts = c.parts.asMap()
			}
			sc.keys = cache.appendDedupKeys(sc.keys[:0], itemKey{c.kind, c.id}, res)
			keys := sc.keys
			at := partSlot{i: -1}
			for _, key := range keys {
				h, ok := byKey[key]
				// Two memories from one event are two facts: only equal
				// content merges them.
				if ok && (key.kind == 'c' || res.Kind != KindMemory || h.g.res.Kind != KindMemory) {
					at = h
					break
				}
			}
			rank := w.anchor(res)
			if at.g != nil {
				mergeSources(&at.g.parts[at.i].sources, res.Sources)
			} else if g := w.near(byRank, rank); g != nil && (floor < 0 || c.score >= floor) {
				at = partSlot{g, len(g.parts)}
				g.parts = append(g.parts, part{rank: rank, text: res.Content, sources: cleanSources(res.Sources)})
				byRank[rank] = g
			} else {
				if len(out) == k {
					continue
				}
				at = partSlot{newGroup(&sc.groups, res, part{rank: rank, text: res.Content, sources: cleanSources(res.Sources)}), 0}
				out = append(out, at.g)
				if rank >= 0 {
					byRank[rank] = at.g
				}
			}
			for _, key := range keys {
				if _, taken := byKey[key]; !taken { // the best group keeps a key
					byKey[key] = at
				}
			}
		}
	}
	results := make([]Result, len(out))
	for i, g := range out {
		results[i] = *g.res
		results[i].Content, results[i].Sources = g.render(terms, maxBytes)
	}
	return results, missing, nil
}

// anchor returns the rank of the one perceived message a result comes
// from, or -1.
func (w window) anchor(r *Result) int32 {
	if w.rank == nil || len(r.Sources.MessageIDs) != 1 {
		return -1
	}
	if rank, ok := w.rank(r.Sources.MessageIDs[0]); ok {
		return rank
	}
	return -1
}

// near returns the group holding a perceived message within w.span of rank
// that has room for another part, the closest first.
func (w window) near(byRank map[int32]*group, rank int32) *group {
	if rank < 0 {
		return nil
	}
	for d := int32(1); d <= int32(w.span); d++ {
		for _, r := range []int32{rank - d, rank + d} {
			if g, ok := byRank[r]; ok && len(g.parts) < w.parts {
				return g
			}
		}
	}
	return nil
}

// render returns the content of a group and the sources of the parts whose
// text it keeps. Parts are given room in the order they joined (the best
// match first), each whole when it fits in what is left of maxBytes, else
// cut around the terms, and left out when too little room is left; the
// content shows them in the order they happened, one per line.
func (g *group) render(terms []string, maxBytes int) (string, character.Sources) {
	if len(g.parts) == 1 {
		return snippet(g.res.Content, terms, maxBytes), g.parts[0].sources
	}
	texts := make([]string, len(g.parts))
	left := maxBytes
	for i, p := range g.parts {
		switch {
		case maxBytes <= 0:
			texts[i] = p.text
		case len(p.text)+1 <= left:
			texts[i] = p.text
			left -= len(p.text) + 1
		case left >= minPartBytes:
			texts[i] = snippet(p.text, terms, left-1)
			left -= len(texts[i]) + 1
		}
	}
	order := make([]int, len(g.parts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return g.parts[order[a]].rank < g.parts[order[b]].rank })
	var b strings.Builder
	src := character.Sources{JournalIDs: []int64{}, MessageIDs: []int64{}, EventRefs: []string{}}
	for _, i := range order {
		if texts[i] == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(texts[i])
		mergeSources(&src, g.parts[i].sources)
	}
	return b.String(), src
}

// minPartBytes is the least room worth giving a joined part: less shows
// too little of it to say anything.
const minPartBytes = 64

// dedupKey names what a result points at (appendDedupKeys): kind 'c' its
// content, by its fingerprint, n; 'e' a game event, by a 64-bit hash of
// its ref (refSeed: refs are compared as they are, case and all); 'm',
// 'j' and 'k' a message, journal entry or memory, by its id, n. A kind
// and a number, not a string: the keys of every result a search shows are
// kept with it (rowCache), and strings of their own were some 100,000 of
// the 520,000 objects a world of 1,000 NPCs held for the collector to
// trace.
type dedupKey struct {
	kind byte
	n    uint64
}

// refSeed seeds the hashes of event refs in dedup keys: keys are compared
// within the process only.
var refSeed = maphash.MakeSeed()

// appendDedupKeys appends to keys the names of what r points at: its
// content, itself, and the one message, entry or game event it was made
// from, if it cites only one. The content key comes first.
func appendDedupKeys(keys []dedupKey, r *Result) []dedupKey {
	keys = append(keys, dedupKey{kind: 'c', n: fingerprint(r.Content)})
	switch r.Kind {
	case KindMessage:
		keys = append(keys, dedupKey{kind: 'm', n: uint64(r.ID)})
	case KindJournal:
		keys = append(keys, dedupKey{kind: 'j', n: uint64(r.ID)})
	default:
		keys = append(keys, dedupKey{kind: 'k', n: uint64(r.ID)})
	}
	if ids := r.Sources.MessageIDs; len(ids) == 1 {
		keys = append(keys, dedupKey{kind: 'm', n: uint64(ids[0])})
	}
	if ids := r.Sources.JournalIDs; len(ids) == 1 {
		keys = append(keys, dedupKey{kind: 'j', n: uint64(ids[0])})
	}
	if refs := r.Sources.EventRefs; len(refs) == 1 {
		keys = append(keys, dedupKey{kind: 'e', n: maphash.String(refSeed, refs[0])})
	}
	return keys
}

// mergeSources adds the sources of src missing from dst, keeping order.
func mergeSources(dst *character.Sources, src character.Sources) {
	dst.JournalIDs = union(dst.JournalIDs, src.JournalIDs)
	dst.MessageIDs = union(dst.MessageIDs, src.MessageIDs)
	dst.EventRefs = union(dst.EventRefs, src.EventRefs)
}

func union[T comparable](a, b []T) []T {
	if len(b) == 0 {
		return a
	}
	if len(a)+len(b) <= 16 {
		// Sources cite a few rows: a scan costs less than a map.
		for _, x := range b {
			if !slices.Contains(a, x) {
				a = append(a, x)
			}
		}
		return a
	}
	seen := make(map[T]bool, len(a))
	for _, x := range a {
		seen[x] = true
	}
	for _, x := range b {
		if !seen[x] {
			seen[x] = true
			a = append(a, x)
		}
	}
	return a
}

// cleanSources returns s with empty lists instead of nil ones, so results
// encode as arrays, and without repeats (see distinct: a list may be s's
// own).
func cleanSources(s character.Sources) character.Sources {
	return character.Sources{
		JournalIDs: distinct(s.JournalIDs),
		MessageIDs: distinct(s.MessageIDs),
		EventRefs:  distinct(s.EventRefs),
	}
}

// distinct returns xs without repeats, in order, never nil. A list without
// repeats is returned itself, its capacity cut to its length, so that
// appending to what is returned (union) never writes into xs's array: the
// results a search keeps share their sources' lists instead of holding
// copies of them.
func distinct[T comparable](xs []T) []T {
	if len(xs) == 0 {
		return []T{}
	}
	if !hasRepeats(xs) {
		return xs[:len(xs):len(xs)]
	}
	return union([]T{}, xs)
}

// hasRepeats reports whether a value occurs twice in xs.
func hasRepeats[T comparable](xs []T) bool {
	if len(xs) <= 16 {
		for i := 1; i < len(xs); i++ {
			if slices.Contains(xs[:i], xs[i]) {
				return true
			}
		}
		return false
	}
	seen := make(map[T]bool, len(xs))
	for _, x := range xs {
		if seen[x] {
			return true
		}
		seen[x] = true
	}
	return false
}

// load reads the rows of the candidates as results, keyed by kind and id.
// Rows of another NPC, summaries and rows gone from the database are
// absent. Rows are read by primary key alone and their NPC checked here:
// with the NPC in the WHERE clause SQLite may walk the NPC's whole index
// instead.
//
// Messages and journal entries are found in cache first, and those read
// are added to it. Messages of live, the NPC's live history as the caller
// holds it (see SearchOptions.Live), are made from it instead of read, and
// added too. The results go into out, emptied first, their copies kept in
// buf when it is not nil (keepResult).
func (s *Store) load(ctx context.Context, npc string, cs []candidate, cache *rowCache, live []character.Message, out map[itemKey]*Result, buf *[]Result) error {
	var ids [3][]int64
	clear(out)
	for _, c := range cs {
		k := itemKey{c.kind, c.id}
		if c.kind != kindMemory {
			if res, ok := cache.get(k); ok {
				out[k] = keepResult(buf, res)
				continue
			}
		}
		if c.kind == kindMessage {
			if m := heldMessage(live, c.id); m != nil && m.CharacterID == npc {
				if !m.Summary { // as loadRows leaves summaries out
					res := messageResult(m.ID, m.Content, unstamped(m.Content), m.EventRefs.V, s.asStored(m.GameTime))
					cache.put(res)
					out[k] = keepResult(buf, res)
				}
				continue
			}
		}
		ids[c.kind] = append(ids[c.kind], c.id)
	}
	for kind, list := range ids {
		for len(list) > 0 {
			part := list[:min(len(list), maxLoadIDs)]
			list = list[len(part):]
			if err := s.loadRows(ctx, npc, itemKind(kind), part, out, cache, buf); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadRows reads the rows of ids, items of kind kind, into out (their
// copies in buf, see keepResult), keeping messages and journal entries in
// cache.
func (s *Store) loadRows(ctx context.Context, npc string, kind itemKind, ids []int64, out map[itemKey]*Result, cache *rowCache, buf *[]Result) error {
	// The id lists are padded so that the statements keep a few shapes,
	// which stay prepared.
	ids = store.PadIn(ids)
	if s.onLoad != nil {
		s.onLoad(kind)
	}
	rows, err := s.hotQuery(ctx, loadQuery(kind, len(ids), store.IsSQLite(s.db)), idArgs(ids)...)
	if err != nil {
		return fmt.Errorf("read %s of %q: %w", kindNames[kind], npc, err)
	}
	defer rows.Close()
	var (
		id         int64
		owner      string
		content    string
		src        sql.RawBytes
		gameTime   time.Time
		importance int
		summary    bool
	)
	for rows.Next() {
		switch kind {
		case kindMessage:
			err = rows.Scan(&id, &owner, &summary, &content, &src, store.TimeText{T: &gameTime})
		default:
			err = rows.Scan(&id, &owner, &content, &src, store.TimeText{T: &gameTime}, &importance)
		}
		if err != nil {
			return fmt.Errorf("read %s of %q: %w", kindNames[kind], npc, err)
		}
		k := itemKey{kind, id}
		if owner != npc || summary || out[k] != nil {
			continue // a padded id repeats its row
		}
		var res Result
		switch kind {
		case kindMessage:
			var refs store.JSON[[]string]
			if err := refs.Scan([]byte(src)); err != nil {
				return fmt.Errorf("read messages of %q: event refs of %d: %w", npc, id, err)
			}
			res = messageResult(id, content, unstamped(content), refs.V, gameTime)
		default:
			var sources store.JSON[character.Sources]
			if err := sources.Scan([]byte(src)); err != nil {
				return fmt.Errorf("read %s of %q: sources of %d: %w", kindNames[kind], npc, id, err)
			}
			if kind == kindJournal {
				res = entryResult(id, unstamped(content), sources.V, gameTime, importance)
			} else {
				res = Result{Kind: KindMemory, ID: id, Content: content, Sources: cleanSources(sources.V),
					GameTime: gameTime.UTC(), Importance: importance}
			}
		}
		if kind != kindMemory {
			cache.putRead(res)
		}
		out[k] = keepResult(buf, res)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s of %q: %w", kindNames[kind], npc, err)
	}
	return nil
}

// heldMessage returns the message of id in live, nil when live does not
// hold it. A live history holds its summaries first, then its other
// messages in the order of their ids, which are searched for id (a
// summary is never a search's candidate).
func heldMessage(live []character.Message, id int64) *character.Message {
	from := 0
	for from < len(live) && live[from].Summary {
		from++
	}
	rest := live[from:]
	i, found := slices.BinarySearchFunc(rest, id, func(m character.Message, id int64) int { return cmp.Compare(m.ID, id) })
	if !found {
		return nil
	}
	return &rest[i]
}

// asStored returns t as the database gives it back: PostgreSQL keeps
// microseconds.
func (s *Store) asStored(t time.Time) time.Time {
	if store.IsSQLite(s.db) {
		return t
	}
	return t.Truncate(time.Microsecond)
}

// kindNames name the kinds of items in errors.
var kindNames = [3]string{kindMemory: "memories", kindJournal: "journal", kindMessage: "messages"}

// messageResult is what a search shows of a perceived or spoken message;
// shown is unstamped(content).
func messageResult(id int64, content, shown string, refs []string, gameTime time.Time) Result {
	return Result{Kind: KindMessage, ID: id, Content: shown,
		Sources:  cleanSources(character.Sources{MessageIDs: []int64{id}, EventRefs: refs}),
		GameTime: gameTime.UTC(), Importance: Importance("", content)}
}

// entryResult is what a search shows of a journal entry, whose content
// without stamps is shown: it cites itself besides its sources.
func entryResult(id int64, shown string, src character.Sources, gameTime time.Time, importance int) Result {
	src.JournalIDs = append(append([]int64{}, src.JournalIDs...), id)
	return Result{Kind: KindJournal, ID: id, Content: shown, Sources: cleanSources(src),
		GameTime: gameTime.UTC(), Importance: importance}
}
