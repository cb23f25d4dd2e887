package character

import (
	"time"

	"github.com/npcd/npcd/store"
)

// Event is something the NPC perceived and no tick has consumed yet, or, once
// ConsumedAt is set, the record of which tick consumed it. An event answered
// 202 is a committed row, so it survives a crash of the daemon.
type Event struct {
	Seq         int64   `gorm:"primaryKey;autoIncrement"`
	CharacterID string  `gorm:"size:64;not null;uniqueIndex:idx_events_char_ref,priority:1"` // pending index: migration character v8
	Ref         *string `gorm:"size:128;uniqueIndex:idx_events_char_ref,priority:2"`         // the game's event id; nil when none was given
	Kind        string  `gorm:"size:32"`
	// Actor is who acts as the NPC sees them (the display name); ActorID
	// is the game's stable id of that actor, empty when the game sent only
	// a name. Profiles key on the id when there is one.
	Actor      string `gorm:"size:128"`
	ActorID    string `gorm:"size:128"`
	Target     string `gorm:"size:128"`
	Text       string
	Room       string `gorm:"size:128"`
	At         time.Time
	ReceivedAt time.Time
	// ConsumedAt is set by the tick that turned the event into a message, in
	// the same transaction that wrote that message.
	ConsumedAt   *time.Time
	ConsumedTick int64
	MessageID    *int64
}

// Profile is what the NPC knows about one entity (a player, another NPC, a
// faction, a place, an item). Beliefs about it are Facts.
type Profile struct {
	ID          int64  `gorm:"primaryKey;autoIncrement" json:"id"`
	CharacterID string `gorm:"size:64;not null;uniqueIndex:idx_profiles_char_entity,priority:1" json:"-"`
	// Entity is the profile's key: EntityKey of a name, or ActorKey of a
	// game's actor id (then Name is the latest display name seen).
	Entity       string                         `gorm:"size:192;not null;uniqueIndex:idx_profiles_char_entity,priority:2" json:"entity"`
	Name         string                         `gorm:"size:128" json:"name"`
	Kind         string                         `gorm:"size:32" json:"kind"`
	Description  string                         `json:"description"`
	Relationship store.JSON[map[string]float64] `gorm:"type:text" json:"relationship"`
	Mentions     int                            `json:"mentions"`
	FirstSeen    time.Time                      `json:"first_seen"`
	LastSeen     time.Time                      `json:"last_seen"`
	UpdatedAt    time.Time                      `json:"updated_at"`
	Facts        []Fact                         `gorm:"-" json:"facts"`
}

// Fact is one belief about an entity. A revised belief supersedes the old
// one: the old row is kept with SupersededAt and SupersededBy set, so the NPC
// can say what it thought before.
type Fact struct {
	ID          int64  `gorm:"primaryKey;autoIncrement" json:"id"`
	CharacterID string `gorm:"size:64;not null;index:idx_facts_char_entity,priority:1" json:"-"`
	Entity      string `gorm:"size:192;not null;index:idx_facts_char_entity,priority:2" json:"entity"`
	// Key names the slot a fact fills ("sword", "home"); a new fact with the
	// same key supersedes the current one. Empty for free-standing facts.
	Key          string              `gorm:"size:64" json:"key,omitempty"`
	Content      string              `json:"content"`
	Source       string              `gorm:"size:32" json:"source"` // tool, consolidation, game
	Sources      store.JSON[Sources] `gorm:"type:text" json:"sources"`
	ValidFrom    time.Time           `json:"valid_from"`
	SupersededAt *time.Time          `json:"superseded_at"`
	SupersededBy *int64              `json:"superseded_by,omitempty"`
	CreatedAt    time.Time           `json:"created_at"`
}

// Sources cite where a piece of knowledge came from.
type Sources struct {
	JournalIDs []int64  `json:"journal_ids"`
	MessageIDs []int64  `json:"message_ids"`
	EventRefs  []string `json:"event_refs"`
}

// TickRecord is one non-idle tick as it happened: the context before the
// model call, what the call cost, and the compaction that ran, if any. It is
// what the timeline and as-of views read.
type TickRecord struct {
	ID               int64  `gorm:"primaryKey;autoIncrement"`
	CharacterID      string `gorm:"size:64;not null;uniqueIndex:idx_ticks_char_tick,priority:1"`
	Tick             int64  `gorm:"not null;uniqueIndex:idx_ticks_char_tick,priority:2"`
	At               time.Time
	GameTime         time.Time
	ContextTokens    int
	Window           int
	Utilization      float64
	PromptTokens     int
	CompletionTokens int
	LLMCalls         int
	Actions          int
	CompactionID     *int64
	// Recovery says how a context overflow was handled: "", "compacted" or
	// "newest_turn_only".
	Recovery string `gorm:"size:32"`
	// FirstMessageID and LastMessageID bound the messages this tick wrote.
	FirstMessageID int64
	LastMessageID  int64
}
