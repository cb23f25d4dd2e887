package journal

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// An index's floor. The cache's budget (WithCacheBytes) bounds the indexes
// of all NPCs, and so each one: an index that alone outgrows it first
// releases the vectors of its oldest rows (trimVectors), which leaves some
// 250 bytes a message. An NPC that keeps living would grow past any budget
// by those, so once its index is over the budget with its vectors
// released, its oldest rows leave it: the NPC gets a floor, an id for
// messages and one for journal entries at or below which they are not
// indexed, chosen so that the index comes back to three quarters of the
// budget, messages first, and its index is built again above the floor,
// beside the one in use, which goes on serving the NPC's searches until the
// new one takes its place (rebuild): no search waits for that build, and
// for its length both are held.
// Those rows stay in the database (aihistory shows them); a search finds
// what old messages said through the NPC's journal entries (its
// compactions' summaries among them) and memories, no longer word for
// word, and memories stay indexed whatever their age. The newest
// minFloorRows messages and minFloorEntries entries are always kept, so a
// budget too small for them and the memories bounds an index at what they
// cost.
//
// A floor lives as long as the Retriever (a restart finds it again in the
// first build, which stops once it outgrows the budget, reads the floor
// from the database and starts again above it) and only rises, until the
// NPC is forgotten (deleted, or its rows vanished under its index).

// floorIDs is an NPC's floor: the ids of the newest message and journal
// entry its index leaves out, 0 for none.
type floorIDs struct{ msg, entry int64 }

// minFloorRows and minFloorEntries are how many of its newest messages and
// journal entries an index keeps however small the budget: a few hundred
// ticks' worth.
const (
	minFloorRows    = 1024
	minFloorEntries = 256
)

// floor returns NPC id's floor.
func (r *Retriever) floor(id string) floorIDs {
	r.floorMu.Lock()
	defer r.floorMu.Unlock()
	return r.floors[id]
}

// floorFor returns, for x of size bytes with its vectors released as far
// as they go (trim), the floor that brings it to three quarters of the
// budget, dropping its oldest messages first, then its oldest journal
// entries, and how many of its messages stay above it (keep); ok is false
// when x is within the budget, or when what it may drop cannot bring it
// there and is less than a quarter of those rows (its memories, which stay,
// hold most of it): building it again for so little at every search
// would cost more than it saves.
func (r *Retriever) floorFor(x *npcIndex, size int64) (f floorIDs, keep int, ok bool) {
	limit := r.cfg.cacheBytes
	msgs, entries := x.byID[kindMessage], x.byID[kindJournal]
	if limit <= 0 || size <= limit || len(x.items) == 0 || len(msgs)+len(entries) <= minFloorRows+minFloorEntries {
		return floorIDs{}, 0, false
	}
	// Texts waiting for their vector (a build's newest rows, until a
	// search embeds them) are passing: their vectors' room is counted.
	if size -= waitingBytes(x.pending); size <= limit {
		return floorIDs{}, 0, false
	}
	// A row frees its share of what the index holds beside its vector,
	// and its vector if it still has one: its share of the store, which
	// may hold some packed (packVectors), and its scale.
	per := max(1, (size-x.vecs.bytes())/int64(len(x.items)))
	vec := x.vecs.bytes()/int64(max(1, len(x.items)-x.vecFrom)) + 4
	goal, freed := size-limit*3/4, int64(0)
	drop := func(list []int32, least int) int {
		n := 0
		for n < len(list)-least && freed < goal {
			freed += per
			if p := int(list[n]); p >= x.vecFrom && x.dims > 0 {
				freed += vec
			}
			n++
		}
		return n
	}
	dm := drop(msgs, minFloorRows)
	de := drop(entries, minFloorEntries)
	if freed < goal && 4*(dm+de) < len(msgs)+len(entries) {
		return floorIDs{}, 0, false
	}
	f = x.floor
	if dm > 0 {
		f.msg = x.items[msgs[dm-1]].id
	}
	if de > 0 {
		f.entry = x.items[entries[de-1]].id
	}
	return f, len(msgs) - dm, dm+de > 0
}

// raiseFloor records floor f, above which keep messages of x's NPC stay,
// for the index x of size bytes, and says so.
func (r *Retriever) raiseFloor(x *npcIndex, f floorIDs, keep int, size int64) {
	r.floorMu.Lock()
	if r.floors == nil {
		r.floors = map[string]floorIDs{}
	}
	old, had := r.floors[x.npc]
	f.msg, f.entry = max(f.msg, old.msg), max(f.entry, old.entry)
	r.floors[x.npc] = f
	r.floorMu.Unlock()
	ev := r.log.Debug()
	if !had {
		ev = r.log.Warn()
	}
	ev.Str("npc", x.npc).Int64("floor_message_id", f.msg).Int64("floor_entry_id", f.entry).Int("messages_kept", keep).Int64("index_bytes", size).
		Int64("cache_limit_bytes", r.cfg.cacheBytes).
		Msg("an NPC's search index outgrew the cache's budget with the vectors of its oldest rows released: its oldest messages, then journal entries, are left out of it (they stay stored, and searches find what old messages said through its summaries and memories); raise NPCD_INDEX_CACHE_MB to search them word for word")
}

// outgrown raises the floor of x's NPC when x, of size bytes, outgrew the
// budget in the middle of a build, which has read the NPC's messages up to
// x.lastMsg, and floorFor gave f and keep: to the floor that keeps the
// newest keep messages of all the NPC has, read from the database. It
// returns errFloored, for the build to start again above it.
func (r *Retriever) outgrown(ctx context.Context, x *npcIndex, f floorIDs, keep int, size int64) error {
	rows, err := r.store.hotQuery(ctx, keptFloorSQL, searchableArgs(x.npc, f.msg, keep)...)
	if err != nil {
		return fmt.Errorf("index messages of %q: floor: %w", x.npc, err)
	}
	defer rows.Close()
	if rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("index messages of %q: floor: %w", x.npc, err)
		}
		f.msg = max(f.msg, id)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("index messages of %q: floor: %w", x.npc, err)
	}
	r.raiseFloor(x, f, keep, size)
	return errFloored
}

// keptFloorSQL reads the id of the newest searchable message of an NPC
// above an id that is not among the newest n of them (the last argument):
// the floor that keeps those n.
const keptFloorSQL = `SELECT id FROM messages WHERE ` + searchableAbove + ` ORDER BY id DESC LIMIT 1 OFFSET ?`

// rebuild builds the index of old's NPC again above its floor, beside old,
// which goes on serving the NPC's searches meanwhile, and puts it in old's
// place in the cache, unless old left the cache meanwhile (evicted,
// forgotten). A build that fails leaves old in use, to try again at a
// later search.
func (r *Retriever) rebuild(old *npcIndex) {
	defer r.building.Done()
	if r.beforeRebuild != nil {
		r.beforeRebuild()
	}
	ctx := context.Background()
	var y *npcIndex
	var err error
	for {
		y = r.newIndex(old.npc)
		y.mu.Lock()
		if err = r.refresh(ctx, y); !errors.Is(err, errFloored) {
			break
		}
		y.mu.Unlock() // the floor rose: this ends, as it only rises
	}
	if err != nil {
		y.mu.Unlock()
		r.log.Warn().Err(err).Str("npc", old.npc).Msg("a search index over its budget was not built again above its floor; the one in use stays")
		old.mu.Lock()
		old.rebuilding = false
		old.mu.Unlock()
		return
	}
	// What the first search of y would make, made here: the sentence
	// vectors and the vectors its rows wait for (all of them with a local
	// embedder), so that y holds no texts waiting when it takes old's
	// place, nor makes that search pay for them.
	y.ensureSemantic()
	if _, err := r.embedPending(ctx, y, "", r.cfg.maxEmbed); err != nil {
		r.log.Warn().Err(err).Str("npc", old.npc).Msg("search index built again above its floor without the vectors of its newest rows; the next searches make them")
	}
	size := r.trim(y, y.bytes())
	y.sizeHint, y.usedHint = size, time.Now()
	y.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.npcs[old.npc] != old {
		return
	}
	r.npcs[old.npc] = y
	r.cached += size - old.sizeHint
	r.builds++
}
