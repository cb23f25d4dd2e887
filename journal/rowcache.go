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
	rows  map[int64]msgRow
	bytes int64
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
	n := int64(len(m.Content)+len(m.CharacterID)+16*len(m.EventRefs.V)) + 96
	if c.rows == nil || c.bytes+n > maxRowBytes {
		c.rows, c.bytes = map[int64]msgRow{}, 0
	}
	c.rows[m.ID] = m
	c.bytes += n
}

func (c *rowCache) size() int64 {
	if c == nil {
		return 0
	}
	return c.bytes
}
