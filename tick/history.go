package tick

import (
	"context"
	"slices"
	"sync"
	"unsafe"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/keeprank"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
)

// DefaultHistoryCacheBytes bounds the live histories the engine keeps in
// memory (see Config.HistoryCacheBytes). A held message costs about 700
// bytes (the row, its prompt form, and the room its history's array keeps
// to grow), so this holds the full contexts of about 2,400 NPCs of the
// default window; a world that ticks more NPCs in turn reads the histories
// that do not fit back from the database (see put).
const DefaultHistoryCacheBytes = 256 << 20

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
	// reads counts the histories read from the database (liveHistory);
	// evictions, those dropped to keep within max.
	reads, evictions int64
}

// HistoryCacheStats describes the engine's live-history cache: the bytes
// it holds and may hold (NPCD_HISTORY_CACHE_MB), the NPCs whose history it
// holds, how many histories ticks read from the database (an NPC's first
// tick, a history another process changed, or one dropped to keep within
// the budget), and how many it dropped. Reads that keep growing with the
// ticks mean the budget is too small for the NPCs ticked in turn.
type HistoryCacheStats struct {
	Bytes, Limit     int64
	Entries          int
	Reads, Evictions int64
}

// stats returns the cache's HistoryCacheStats.
func (h *historyCache) stats() HistoryCacheStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return HistoryCacheStats{Bytes: h.size, Limit: h.max, Entries: len(h.npcs), Reads: h.reads, Evictions: h.evictions}
}

// noteRead counts a history read from the database.
func (h *historyCache) noteRead() {
	h.mu.Lock()
	h.reads++
	h.mu.Unlock()
}

type historyEntry struct {
	rev   int64
	msgs  []character.Message
	bytes int64
	used  int64
	// prompt is the prompt form of the NPC's live history, kept from one
	// revision to the next (see livePrompt).
	prompt *livePrompt
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
	var lp *livePrompt
	if old, ok := h.npcs[id]; ok {
		h.size -= old.bytes
		lp = old.prompt
		n += lp.bytes()
	}
	h.clock++
	h.npcs[id] = &historyEntry{rev: rev, msgs: msgs, bytes: n, used: h.clock, prompt: lp}
	h.size += n
	if h.size <= h.max {
		return
	}
	all := make([]keeprank.Entry, 0, len(h.npcs))
	for k, en := range h.npcs {
		if k != id {
			all = append(all, keeprank.Entry{ID: k, Used: en.used})
		}
	}
	// In keeprank's order: a game that ticks its NPCs in turn ticks next
	// the one ticked least recently, and dropping that one first would read
	// every history back at every tick once the NPCs outgrow the budget.
	// Down to 90% of the budget, so that eviction is not paid on every put.
	keeprank.DropOrder(all)
	for _, a := range all {
		if h.size <= h.max*9/10 {
			break
		}
		h.size -= h.npcs[a.ID].bytes
		delete(h.npcs, a.ID)
		h.evictions++
	}
}

// promptOf returns the prompt form kept with NPC id's history, nil when no
// history of it is held. Only the tick holding the NPC's lock uses it.
func (h *historyCache) promptOf(id string) *livePrompt {
	h.mu.Lock()
	defer h.mu.Unlock()
	en, ok := h.npcs[id]
	if !ok {
		return nil
	}
	if en.prompt == nil {
		en.prompt = &livePrompt{}
	}
	return en.prompt
}

// livePrompt is the prompt form of an NPC's live history, kept with the
// history held in memory so that a tick converts only what is new
// (livePrompt.assemble). msgs[i] is live[i] as it enters the prompt
// (promptOf) for the history array whose first message is at base, and
// ids[i] and masked[i] are the id and the masking of the message it was
// converted from: a held history changes in place only by the masking of
// a message (afterTurn), which is converted again, and any other history —
// read again, compacted, written by another process — is another array.
// head is the leading system message made of the system text headSystem
// and the summary headSummary. Only the tick holding the NPC's lock reads
// or writes it; the slices given to a model are new, and share only what
// is never changed, so a model may keep them, unless the model keeps none
// (lendingPrompt).
type livePrompt struct {
	base                          *character.Message
	msgs                          []llm.Message
	ids                           []int64
	masked                        []bool
	headSystem, headSummary, head string
	// counter, when set (countWith), counts each prompt build makes, so
	// that a model reporting usage by counting need not count it again:
	// toks[i] is its count of msgs[i], -1 until counted, headN that of the
	// leading system message of text headText, and tokens that of the
	// whole prompt build made last (as llm.Counter.Messages gives it), 0
	// without a counter.
	counter  *llm.Counter
	toks     []int32
	headText string
	headN    int
	tokens   int
}

// sync returns the prompt form of every message of live, converting only
// those it does not hold. With lp nil, or live empty, it returns nil.
func (lp *livePrompt) sync(live []character.Message) []llm.Message {
	if lp == nil || len(live) == 0 {
		return nil
	}
	if lp.base != &live[0] {
		lp.base = &live[0]
		lp.msgs, lp.ids, lp.masked, lp.toks = lp.msgs[:0], lp.ids[:0], lp.masked[:0], lp.toks[:0]
	}
	n := min(len(lp.msgs), len(live))
	for i := 0; i < n; i++ {
		if m := &live[i]; lp.ids[i] != m.ID || lp.masked[i] != m.Masked {
			lp.msgs[i], lp.ids[i], lp.masked[i], lp.toks[i] = lp.convert(i, m), m.ID, m.Masked, -1
		}
	}
	for i := n; i < len(live); i++ {
		m := &live[i]
		lp.msgs, lp.ids, lp.masked = append(lp.msgs, lp.convert(i, m)), append(lp.ids, m.ID), append(lp.masked, m.Masked)
		lp.toks = append(lp.toks, -1)
	}
	return lp.msgs[:len(live)]
}

// countWith makes build count the prompts it makes with c (see counted),
// or count nothing with c nil. Counts made with another counter are
// forgotten.
func (lp *livePrompt) countWith(c *llm.Counter) {
	if lp == nil || lp.counter == c {
		return
	}
	lp.counter, lp.headText, lp.headN = c, "", -1
	for i := range lp.toks {
		lp.toks[i] = -1
	}
}

// counted returns the count of the prompt build made last and the
// encoding it was counted in (llm.Request.MessageTokens), 0 and "" when
// lp counts nothing.
func (lp *livePrompt) counted() (int, string) {
	if lp == nil || lp.counter == nil || lp.tokens == 0 {
		return 0, ""
	}
	return lp.tokens, lp.counter.Encoding()
}

// tok returns the count of msgs[i], counting it the first time.
func (lp *livePrompt) tok(i int) int {
	if lp.toks[i] < 0 {
		lp.toks[i] = int32(min(lp.counter.Message(lp.msgs[i]), 1<<31-1))
	}
	return int(lp.toks[i])
}

// headTokens returns the count of the leading system message of text
// system, kept while the text stays the same.
func (lp *livePrompt) headTokens(system string) int {
	if lp.headN < 0 || lp.headText != system {
		lp.headText, lp.headN = system, lp.counter.Message(llm.Message{Role: llm.RoleSystem, Content: system})
	}
	return lp.headN
}

// convert is message m, at index i of the live history, as it enters the
// prompt; a summary heading the history goes in the leading system
// message instead (withSummary).
func (lp *livePrompt) convert(i int, m *character.Message) llm.Message {
	if i == 0 && m.Summary {
		return llm.Message{}
	}
	return promptOf(m)
}

// withSummary is the leading system message of system text system and
// the summary of content summary (joinSummary), kept while they stay the
// same.
func (lp *livePrompt) withSummary(system, summary string) string {
	if lp == nil {
		return joinSummary(system, summary)
	}
	if lp.head == "" || lp.headSystem != system || lp.headSummary != summary {
		lp.headSystem, lp.headSummary, lp.head = system, summary, joinSummary(system, summary)
	}
	return lp.head
}

// bytes estimates the memory lp holds beyond the history it was made of.
func (lp *livePrompt) bytes() int64 {
	if lp == nil {
		return 0
	}
	n := int64(cap(lp.msgs))*int64(unsafe.Sizeof(llm.Message{})) + int64(cap(lp.ids))*9 + int64(cap(lp.toks))*4 + int64(len(lp.head))
	// A message's calls are the history's own (character.Message.Prompt);
	// a masked result's placeholder is the prompt's.
	for i := range lp.msgs {
		if lp.masked[i] {
			n += int64(len(lp.msgs[i].Content))
		}
	}
	return n
}

// compacted applies to NPC id's history what a compaction's commit did to
// the stored one (ch), which left it at revision rev: the history held at
// the revision the commit found, without the rows it archived, with those
// it masked marked so and its summary after the other summaries, is the
// stored one at rev, and the next tick need not read it again. A history
// held at another revision (evicted, or written by another process) is
// left to be read again. The caller holds the NPC's lock.
func (h *historyCache) compacted(id string, ch *sleep.LiveChange, rev int64) {
	if ch == nil {
		return
	}
	held, ok := h.get(id, ch.Prior)
	if !ok {
		return
	}
	gone := make(map[int64]bool, len(ch.Archived))
	for _, m := range ch.Archived {
		gone[m] = true
	}
	// A new array: a history changed otherwise than by appending or by
	// masking is another array (see livePrompt), and the tick that
	// compacted reads the held one until it reads the history again.
	out := make([]character.Message, 0, max(len(held)-len(ch.Archived), 0)+1+liveRoom)
	at := 0 // after the last summary kept
	for i := range held {
		if !gone[held[i].ID] {
			out = append(out, held[i])
			if held[i].Summary {
				at = len(out)
			}
		}
	}
	h.put(id, rev, afterTurn(slices.Insert(out, at, ch.Summary), nil, ch.Masked))
}

// liveRoom is the room a history rewritten by a compaction keeps to grow:
// a few turns, so that the next ticks append in place.
const liveRoom = 16

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
	e.history.noteRead()
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

// maskableIDs returns the ids of the tool results that masking by policy
// would mask, those of live and then those of current (the turn being
// committed, whose rows have their ids): unmasked, of a turn before
// beforeTurn, of a tool not exempt, and whose placeholder is smaller. They
// are the rows character.Store.MaskToolResults would find.
func maskableIDs(live []character.Message, current []*character.Message, beforeTurn int64, exempt func(string) bool) []int64 {
	var ids []int64
	for i := range live {
		if m := &live[i]; m.Turn < beforeTurn && maskableResult(m, exempt) {
			ids = append(ids, m.ID)
		}
	}
	for _, m := range current {
		if m.Turn < beforeTurn && maskableResult(m, exempt) {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// maskableResult reports whether m is a tool result masking would shrink:
// unmasked, of a tool not exempt, and whose placeholder is smaller.
func maskableResult(m *character.Message, exempt func(string) bool) bool {
	return m.Role == llm.RoleTool && !m.Masked && m.MaskTokens < m.ViewTokens && !exempt(m.ToolName)
}
