package sleep

import (
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/store"
)

// Compaction triggers.
const (
	TriggerSleep     = "sleep"
	TriggerEmergency = "emergency"
	TriggerManual    = "manual"
	TriggerOverflow  = "overflow"
	TriggerClear     = "clear"
	// TriggerBackground is a compaction the tick engine ran beside an
	// NPC's ticks, after one left its context close to the emergency
	// threshold.
	TriggerBackground = "background"
)

// Triggers lists every compaction trigger, the commonest first: the order
// reports and charts show them in.
var Triggers = []string{TriggerEmergency, TriggerBackground, TriggerSleep, TriggerManual, TriggerOverflow, TriggerClear}

// Summarizers: who wrote a compaction's summary.
const (
	SummarizerLLM      = "llm"
	SummarizerFallback = "fallback"
	SummarizerNone     = "none" // a clear archives without summarizing
)

// Record is one compaction as it happened. It is written in the same
// transaction that archives the compacted rows.
type Record struct {
	ID                int64  `gorm:"primaryKey;autoIncrement" json:"id"`
	CharacterID       string `gorm:"size:64;not null;index" json:"npc"`
	Trigger           string `gorm:"size:16;not null" json:"trigger"`
	TokensBefore      int    `json:"tokens_before"`
	TokensAfter       int    `json:"tokens_after"`
	MessagesCompacted int    `json:"messages_compacted"`
	Summarizer        string `gorm:"size:16" json:"summarizer"`
	// FallbackReason says why the model's summary was not used.
	FallbackReason string `json:"fallback_reason,omitempty"`
	Instruction    string `json:"instruction,omitempty"`
	// SummaryMessageID is the [CONTEXT SUMMARY] message it wrote; JournalID
	// the context_synthesis entry.
	SummaryMessageID int64 `json:"summary_message_id"`
	JournalID        int64 `json:"journal_id"`
	// FirstMessageID and LastMessageID bound the compacted span.
	FirstMessageID int64 `json:"first_message_id"`
	LastMessageID  int64 `json:"last_message_id"`
	// Masked is how many tool results were masked on the way.
	Masked     int                        `json:"masked"`
	Tick       int64                      `json:"tick"`
	GameTime   time.Time                  `json:"game_time"`
	CreatedAt  time.Time                  `json:"created_at"`
	DurationMS int64                      `json:"duration_ms"`
	Metadata   store.JSON[map[string]any] `gorm:"type:text" json:"metadata"`
	// Live is what the commit did to the NPC's live history, for a caller
	// that holds it in memory; not stored: nil on a record read back, and
	// when another write came between the commit's own (the history must
	// be read again then).
	Live *LiveChange `gorm:"-" json:"-"`
}

// LiveChange is what a compaction's commit did to an NPC's live history,
// so that one who holds that history in memory can apply it instead of
// reading the history again: the commit found the history at revision
// Prior, masked the rows Masked, archived the rows Archived and appended
// Summary (as stored), after the other summaries, as the history is read
// (character.Store.LiveMessages). The NPC's row, as the commit returns it,
// holds the revision this leaves.
type LiveChange struct {
	Prior    int64
	Masked   []int64
	Archived []int64
	Summary  character.Message
}

// TableName names the table: compactions.
func (Record) TableName() string { return "compactions" }
