package tick

import (
	"context"
	"slices"
	"sync"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
)

// DefaultHistoryCacheBytes bounds the live histories the engine keeps in
// memory (see Config.HistoryCacheBytes).
const DefaultHistoryCacheBytes = 64 << 20

// historyCache keeps NPCs' live histories in memory, each tagged with the
// history revision it was read or written at (character.State.HistoryRev).
// Every write to an NPC's messages, by this process or another, changes the
// revision in the same statement as the running totals, so an entry whose
// revision equals the NPC row's is exactly what the database holds; any
// other entry is ignored and replaced. The tick writes its own turns
// through (see Engine.commit). Least recently used entries go first when
// the byte budget is exceeded.
type historyCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	clock int64
	npcs  map[string]*historyEntry
}

type historyEntry struct {
	rev   int64
	msgs  []character.Message
	bytes int64
	used  int64
}

func newHistoryCache(max int64) *historyCache {
	return &historyCache{max: max, npcs: map[string]*historyEntry{}}
}

// get returns the live history of NPC id at revision rev, if it is held.
// The caller must not change the messages.
func (h *historyCache) get(id string, rev int64) ([]character.Message, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	en, ok := h.npcs[id]
	if !ok || en.rev != rev {
		return nil, false
	}
	h.clock++
	en.used = h.clock
	return en.msgs, true
}

// put stores the live history of NPC id at revision rev, then evicts the
// least recently used histories while over budget (never the one just put).
func (h *historyCache) put(id string, rev int64, msgs []character.Message) {
	n := historyBytes(msgs)
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, ok := h.npcs[id]; ok {
		h.size -= old.bytes
	}
	h.clock++
	h.npcs[id] = &historyEntry{rev: rev, msgs: msgs, bytes: n, used: h.clock}
	h.size += n
	if h.size <= h.max {
		return
	}
	type aged struct {
		id   string
		used int64
	}
	all := make([]aged, 0, len(h.npcs))
	for k, en := range h.npcs {
		if k != id {
			all = append(all, aged{k, en.used})
		}
	}
	slices.SortFunc(all, func(a, b aged) int { return int(a.used - b.used) })
	// Down to 90% of the budget, so that eviction is not paid on every put.
	for _, a := range all {
		if h.size <= h.max*9/10 {
			break
		}
		h.size -= h.npcs[a.id].bytes
		delete(h.npcs, a.id)
	}
}

// drop forgets NPC id's history.
func (h *historyCache) drop(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if en, ok := h.npcs[id]; ok {
		h.size -= en.bytes
		delete(h.npcs, id)
	}
}

// historyBytes estimates the memory msgs hold.
func historyBytes(msgs []character.Message) int64 {
	n := int64(cap(msgs)) * 360 // the struct and its small fields
	for i := range msgs {
		m := &msgs[i]
		n += int64(len(m.Content))
		for _, tc := range m.ToolCalls.V {
			n += int64(len(tc.ID) + len(tc.Name) + len(tc.Args) + 48)
		}
	}
	return n
}

// liveHistory returns NPC c's live history as c's revision has it: from
// memory when held at that revision, else from the database.
func (e *Engine) liveHistory(ctx context.Context, c *character.Character) ([]character.Message, error) {
	if msgs, ok := e.history.get(c.ID, c.State.HistoryRev); ok {
		return msgs, nil
	}
	msgs, err := e.deps.Characters.LiveMessages(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	e.history.put(c.ID, c.State.HistoryRev, msgs)
	return msgs, nil
}

// afterTurn is the live history a committed turn leaves: live, then the
// turn's messages as stored, with the rows the commit masked marked so. It
// reuses live's array: only the tick holding the NPC's lock reads it, and
// the history it held is superseded by the commit.
func afterTurn(live []character.Message, added []*character.Message, masked []int64) []character.Message {
	out := live
	for _, m := range added {
		out = append(out, *m)
	}
	if len(masked) > 0 {
		set := make(map[int64]bool, len(masked))
		for _, id := range masked {
			set[id] = true
		}
		for i := range out {
			if set[out[i].ID] {
				out[i].Masked = true
			}
		}
	}
	return out
}

// maskable reports whether live holds a tool result that masking by policy
// would mask: unmasked, of a turn before beforeTurn, of a tool not exempt,
// and whose placeholder is smaller (character.Store.MaskToolResults).
func maskable(live []character.Message, beforeTurn int64, exempt func(string) bool) bool {
	for i := range live {
		m := &live[i]
		if m.Turn < beforeTurn && maskableResult(m, exempt) {
			return true
		}
	}
	return false
}

// maskableResult reports whether m is a tool result masking would shrink:
// unmasked, of a tool not exempt, and whose placeholder is smaller.
func maskableResult(m *character.Message, exempt func(string) bool) bool {
	return m.Role == llm.RoleTool && !m.Masked && m.MaskTokens < m.ViewTokens && !exempt(m.ToolName)
}
