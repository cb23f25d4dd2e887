package journal

import (
	"time"

	"github.com/npcd/npcd/store"
)

// msgRow is what a search result shows of a message. None of it ever
// changes once the message is written (ids are never reused), so a cached
// row never goes stale.
type msgRow struct {
	ID          int64
	CharacterID string
	Summary     bool
	Content     string
	EventRefs   store.JSON[[]string]
	GameTime    time.Time
}

// maxRowBytes bounds the message rows one NPC's index keeps for its
// results; past it the rows are dropped and read again as needed.
const maxRowBytes = 256 << 10

// rowCache keeps the messages an NPC's searches showed, so the next search,
// which mostly shows the same ones, does not read them again. It belongs to
// the NPC's index and is guarded by its lock; nil caches nothing.
type rowCache struct {
	rows    map[int64]msgRow
	entries map[int64]Entry // journal entries, which are never rewritten either
	bytes   int64
}

func (c *rowCache) get(id int64) (msgRow, bool) {
	if c == nil {
		return msgRow{}, false
	}
	m, ok := c.rows[id]
	return m, ok
}

func (c *rowCache) put(m msgRow) {
	if c == nil {
		return
	}
	c.reserve(int64(len(m.Content)+len(m.CharacterID)+16*len(m.EventRefs.V)) + 96)
	c.rows[m.ID] = m
}

// getEntry returns a kept journal entry.
func (c *rowCache) getEntry(id int64) (Entry, bool) {
	if c == nil {
		return Entry{}, false
	}
	e, ok := c.entries[id]
	return e, ok
}

// putEntry keeps a journal entry: what a result shows of it (content,
// sources, game time, importance) and its NPC.
func (c *rowCache) putEntry(e Entry) {
	if c == nil {
		return
	}
	src := e.Sources.V
	c.reserve(int64(len(e.Content)+len(e.CharacterID)+8*(len(src.JournalIDs)+len(src.MessageIDs))+16*len(src.EventRefs)) + 160)
	c.entries[e.ID] = Entry{ID: e.ID, CharacterID: e.CharacterID, Content: e.Content, Sources: e.Sources,
		GameTime: e.GameTime, Importance: e.Importance}
}

// reserve makes room for n more bytes, starting afresh when the budget
// would be exceeded.
func (c *rowCache) reserve(n int64) {
	if c.rows == nil || c.bytes+n > maxRowBytes {
		c.rows, c.entries, c.bytes = map[int64]msgRow{}, map[int64]Entry{}, 0
	}
	c.bytes += n
}

func (c *rowCache) size() int64 {
	if c == nil {
		return 0
	}
	return c.bytes
}
