package journal

import (
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
)

// Entry types.
const (
	TypeObservation      = "observation"
	TypeConversation     = "conversation"
	TypeReflection       = "reflection"
	TypeNote             = "note"
	TypeFact             = "fact"
	TypeContextSynthesis = "context_synthesis"
)

// Types lists every entry type.
var Types = []string{TypeObservation, TypeConversation, TypeReflection, TypeNote, TypeFact, TypeContextSynthesis}

// ValidType reports whether t is an entry type.
func ValidType(t string) bool {
	for _, x := range Types {
		if x == t {
			return true
		}
	}
	return false
}

// MaxEntryBytes bounds an entry's content; longer text is cut.
const MaxEntryBytes = 16 << 10

// Entry is one journal entry. Entries are appended and, once consolidated
// into memories, marked with ConsolidatedAt; they are never rewritten.
type Entry struct {
	ID          int64  `gorm:"primaryKey;autoIncrement" json:"id"`
	CharacterID string `gorm:"size:64;not null" json:"-"` // indexes: journal migrations 2, 6 and 8
	// Type is one of Types; those of the rarer types are indexed by it
	// (idx_journal_rare_type, migration 8).
	Type       string `gorm:"size:32;not null" json:"type"`
	Content    string `json:"content"`
	Importance int    `json:"importance"`
	// GameTime is when it happened on the game's clock.
	GameTime       time.Time                     `json:"game_time"`
	CreatedAt      time.Time                     `json:"created_at"`
	ConsolidatedAt *time.Time                    `json:"consolidated_at"` // waiting entries: idx_journal_pending (migration 6)
	Sources        store.JSON[character.Sources] `gorm:"type:text" json:"sources"`
	Metadata       store.JSON[map[string]any]    `gorm:"type:text" json:"metadata"`
	// LatestSource is the newest message the entry cites, the largest of
	// Sources.MessageIDs (0 when it cites none), set by Add. An entry
	// cites only messages written before it, so the notable entries
	// citing a message from some id on are the few of the live history,
	// read through an index on it (ListQuery.CitingFrom,
	// idx_journal_notable_source) however long the journal and however
	// fast it was written.
	LatestSource int64 `gorm:"not null;default:0" json:"-"`
}
