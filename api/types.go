package api

import (
	"encoding/json"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/inspect"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/tick"
)

// NPCSettings is the body of PUT /v1/npcs/{npc}. Only Name and Persona are
// required; a zero or nil field takes its default. A nil Tools gives the
// default tools (say, emote); an empty non-nil Tools gives no game tools.
type NPCSettings struct {
	Name            string              `json:"name"`
	Persona         string              `json:"persona"`
	Model           string              `json:"model,omitempty"`
	ContextWindow   int                 `json:"context_window,omitempty"`
	MaxOutputTokens int                 `json:"max_output_tokens,omitempty"`
	MaxSteps        int                 `json:"max_steps,omitempty"`
	Compaction      *CompactionSettings `json:"compaction,omitempty"`
	Masking         *MaskingSettings    `json:"masking,omitempty"`
	Sleep           *SleepSettings      `json:"sleep,omitempty"`
	// Tools has no omitempty: an explicitly empty list must reach the server.
	Tools []Tool `json:"tools"`
	// Scope is the game, shard or zone the NPC belongs to; empty for none.
	Scope    string            `json:"scope,omitempty"`
	AutoTick *AutoTickSettings `json:"auto_tick,omitempty"`
}

// AutoTickSettings let npcd tick the NPC itself after input arrives; see
// character.AutoTickSettings.
type AutoTickSettings struct {
	Enabled    bool `json:"enabled"`
	DebounceMS int  `json:"debounce_ms,omitempty"`
	MaxWaitMS  int  `json:"max_wait_ms,omitempty"`
}

// CompactionSettings say when and how much history is compacted; see
// character.CompactionSettings for the meaning and defaults.
type CompactionSettings struct {
	SleepThreshold         float64 `json:"sleep_threshold,omitempty"`
	EmergencyThreshold     float64 `json:"emergency_threshold,omitempty"`
	PreserveRecentMessages int     `json:"preserve_recent_messages,omitempty"`
	PreserveRatio          float64 `json:"preserve_ratio,omitempty"`
	Target                 float64 `json:"target,omitempty"`
}

// MaskingSettings control observation masking; see character.MaskingSettings.
type MaskingSettings struct {
	KeepRecentTurns int      `json:"keep_recent_turns,omitempty"`
	Enabled         *bool    `json:"enabled,omitempty"`
	ExemptTools     []string `json:"exempt_tools"`
	OffloadBytes    int      `json:"offload_bytes,omitempty"`
}

// SleepSettings schedule the NPC's sleep; an empty Cron uses the world default.
type SleepSettings struct {
	Cron     string `json:"cron"`
	Timezone string `json:"timezone"`
}

// Tool is a game tool the NPC may call. Parameters is the JSON Schema of its
// arguments (an object schema); Returns marks tools whose result the game
// posts back with tool-results before the turn goes on.
type Tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
	Returns     bool           `json:"returns"`
}

// NPC is an NPC as stored, every default applied, with its context budget
// and the warnings its state deserves.
type NPC struct {
	ID string `json:"id"`
	NPCSettings
	Context   tick.Context `json:"context"`
	Warnings  []string     `json:"warnings"`
	CreatedAt time.Time    `json:"created_at"`
	UpdatedAt time.Time    `json:"updated_at"`
}

// Event is one thing an NPC perceives, as tick.EventInput defines it. Kind
// is free text (say, emote, arrive, ...); ID is optional and makes posting
// idempotent; a zero At means now; ActorID is the game's stable id of
// the actor (what profiles key on) and ActorName the name the NPC sees;
// Self marks the NPC's own act as the game
// resolved it, and only then may the actor name the NPC.
type Event = tick.EventInput

// EventsRequest is the body of POST /v1/npcs/{npc}/events.
type EventsRequest struct {
	Events []Event `json:"events"`
}

// EventsAccepted answers POST /v1/npcs/{npc}/events: how many events were
// stored and how many were ignored because their id was seen before.
type EventsAccepted struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
}

// TickResult is what one tick did; see tick.Result.
type TickResult = tick.Result

// BatchTickRequest is the body of POST /v1/tick. An empty or missing NPCs
// ticks every NPC with pending events or posted tool results.
type BatchTickRequest struct {
	NPCs []string `json:"npcs"`
	// Keys maps NPCs of NPCs to the idempotency key of their tick, as the
	// Idempotency-Key header does for one NPC's tick.
	Keys map[string]string `json:"keys,omitempty"`
	// Scope limits an empty NPCs to the pending NPCs of one scope.
	Scope string `json:"scope,omitempty"`
	// Events maps NPCs of NPCs to events to post for them before the
	// batch ticks, as POST /v1/npcs/{npc}/events does: a world's events
	// and its tick in one request. An NPC ticks whatever became of its
	// events; BatchTickResponse.Events says.
	Events map[string][]Event `json:"events,omitempty"`
}

// BatchLine is one line of a batch tick answered as NDJSON: the result of
// an NPC that ticked, or the failure of one that did not.
type BatchLine struct {
	Result *TickResult `json:"result,omitempty"`
	Error  *BatchError `json:"error,omitempty"`
	// Events is what became of the events the request carried for one
	// NPC; these lines come before any tick's.
	Events *NPCEvents `json:"events,omitempty"`
}

// BatchEvents is what became of the events a batch tick carried for one
// NPC: how many were stored and how many ignored as seen before, or, when
// they were refused, the code and message POST /v1/npcs/{npc}/events would
// have answered (nothing of them stored).
type BatchEvents struct {
	Accepted   int    `json:"accepted"`
	Duplicates int    `json:"duplicates"`
	Code       string `json:"code,omitempty"`
	Error      string `json:"error,omitempty"`
}

// NPCEvents is BatchEvents with the NPC it is about, a line of an NDJSON
// batch tick.
type NPCEvents struct {
	NPC string `json:"npc"`
	BatchEvents
}

// Feed is a page of the action feed, GET /v1/actions; see tick.Feed.
type Feed = tick.Feed

// FeedTick is one committed tick in the feed; see tick.FeedTick.
type FeedTick = tick.FeedTick

// BatchTickResponse answers POST /v1/tick: the results of the NPCs that
// ticked and the failures of the others, each in request order.
type BatchTickResponse struct {
	Results []*TickResult `json:"results"`
	Errors  []BatchError  `json:"errors"`
	// Events maps the NPCs the request carried events for to what became
	// of them; absent when it carried none.
	Events map[string]BatchEvents `json:"events,omitempty"`
}

// BatchError is one NPC's failure in a batch tick. Error is the same safe
// message and Code the same code a single tick of that NPC would answer.
type BatchError struct {
	NPC   string `json:"npc"`
	Code  string `json:"code"`
	Error string `json:"error"`
}

// ToolResult is the game's result of a returns:true tool call, as
// tick.ToolResult defines it.
type ToolResult = tick.ToolResult

// ToolResultsRequest is the body of POST /v1/npcs/{npc}/tool-results.
type ToolResultsRequest struct {
	Results []ToolResult `json:"results"`
}

// ToolResultsAccepted answers POST /v1/npcs/{npc}/tool-results.
type ToolResultsAccepted struct {
	Accepted int `json:"accepted"`
}

// CompactRequest is the optional body of POST /v1/npcs/{npc}/compact.
type CompactRequest struct {
	Instruction string `json:"instruction,omitempty"`
}

// CompactResponse answers POST /v1/npcs/{npc}/compact; Compaction is nil
// when there was nothing to compact.
type CompactResponse struct {
	Compaction *tick.Compaction `json:"compaction"`
}

// Message is one row of an NPC's conversation history.
type Message struct {
	ID         int64      `json:"id"`
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls"`
	ToolCallID string     `json:"tool_call_id"`
	ToolName   string     `json:"tool_name"`
	// Summary marks the [CONTEXT SUMMARY] message.
	Summary   bool   `json:"summary"`
	Masked    bool   `json:"masked"`
	Offloaded bool   `json:"offloaded"`
	State     string `json:"state"`
	Tokens    int    `json:"tokens"`
	Turn      int64  `json:"turn"`
	Tick      int64  `json:"tick"`
	// CompactionID is the compaction that archived the message, if any.
	CompactionID *int64         `json:"compaction_id"`
	EventRefs    []string       `json:"event_refs"`
	Metadata     map[string]any `json:"metadata"`
	GameTime     time.Time      `json:"game_time"`
	CreatedAt    time.Time      `json:"created_at"`
}

// ToolCall is a tool call of an assistant message. Args is the call's JSON
// object, or a JSON string holding the raw text when the model's arguments
// did not parse.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// HistoryResponse answers GET /v1/npcs/{npc}/history, oldest first.
type HistoryResponse struct {
	Messages []Message `json:"messages"`
	// NextBefore is the "before" that asks for the page of older messages,
	// or nil when there are none.
	NextBefore *int64 `json:"next_before"`
	// Compactions are the compactions the page's messages refer to: those
	// that archived them and those that wrote its summaries.
	Compactions []sleep.Record `json:"compactions"`
}

// JournalResponse answers GET /v1/npcs/{npc}/journal, oldest first.
type JournalResponse struct {
	Entries []journal.Entry `json:"entries"`
	// NextBefore is the "before" of the page of older entries, or nil.
	NextBefore *int64 `json:"next_before"`
}

// ProfilesResponse answers GET /v1/npcs/{npc}/profiles.
type ProfilesResponse struct {
	Profiles []character.Profile `json:"profiles"`
}

// SleepRequest is the (empty) body of POST /v1/npcs/{npc}/sleep; the body
// may be omitted.
type SleepRequest struct{}

// CompactionsResponse answers GET /v1/npcs/{npc}/compactions, oldest first.
type CompactionsResponse struct {
	Compactions []sleep.Record `json:"compactions"`
	// NextBefore is the "before" of the page of older compactions, or nil.
	NextBefore *int64 `json:"next_before"`
}

// NPCList answers GET /v1/npcs, ordered by id.
type NPCList struct {
	NPCs []NPC `json:"npcs"`
}

// Health answers GET /healthz.
type Health struct {
	Status string `json:"status"`
	// Version is the running npcd's version, from its build information.
	Version string `json:"version"`
}

// ErrorBody is every error response: {"error": {"code", "message"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a machine-readable code and a safe, human-readable message.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Overview answers GET /v1/npcs/{npc}/overview: the first screen of
// `npcd aihistory`.
type Overview struct {
	NPC      string    `json:"npc"`
	Name     string    `json:"name"`
	Model    string    `json:"model"`
	Tick     int64     `json:"tick"`
	Turn     int64     `json:"turn"`
	GameTime time.Time `json:"game_time"`
	// LastTickAt is when the newest recorded tick ran, or nil.
	LastTickAt *time.Time         `json:"last_tick_at"`
	Context    tick.Context       `json:"context"`
	Compaction CompactionSettings `json:"compaction"`
	// Warnings are those of the tick response, such as the summary having
	// been rewritten many times.
	Warnings             []string       `json:"warnings"`
	CompactionsByTrigger map[string]int `json:"compactions_by_trigger"`
	LastCompaction       *sleep.Record  `json:"last_compaction"`
	// Summary is the live [CONTEXT SUMMARY], or nil.
	Summary       *Message    `json:"summary"`
	Sleep         SleepStatus `json:"sleep"`
	Knowledge     Knowledge   `json:"knowledge"`
	PendingEvents int         `json:"pending_events"`
	// Awaiting lists call ids of returns:true tools whose results the game
	// has not posted.
	Awaiting []string `json:"awaiting"`
}

// SleepStatus is when an NPC sleeps. Known is false when whoever answered
// has no scheduler (npcd aihistory --db reads the file, not the daemon):
// NextRun is then unknown, not absent. With Known true a nil NextRun means
// no sleep is scheduled.
type SleepStatus struct {
	Known   bool       `json:"known"`
	NextRun *time.Time `json:"next_run"`
	// Cron and Timezone are the NPC's own; empty means the world default.
	Cron        string     `json:"cron"`
	Timezone    string     `json:"timezone"`
	LastSleepAt *time.Time `json:"last_sleep_at"`
}

// Knowledge counts what an NPC remembers beyond its context.
type Knowledge struct {
	JournalByType map[string]int `json:"journal_by_type"`
	// Unconsolidated counts entries the next sleep will consolidate.
	Unconsolidated     int `json:"unconsolidated"`
	Memories           int `json:"memories"`
	SupersededMemories int `json:"superseded_memories"`
	Profiles           int `json:"profiles"`
	Facts              int `json:"facts"`
	SupersededFacts    int `json:"superseded_facts"`
}

// MemoryResponse answers GET /v1/npcs/{npc}/memory, best first.
type MemoryResponse struct {
	Results []MemoryResult `json:"results"`
}

// MemoryResult is one thing a memory search recalled and why: its score,
// split into parts (keyword, vector, recency, importance... as the
// retriever reports them), and the sources it was made from.
type MemoryResult struct {
	ID int64 `json:"id"`
	// Kind is memory, journal or message; Ref names it for `npcd aihistory
	// show` (mem:ID, j:ID, m:ID).
	Kind       string             `json:"kind"`
	Ref        string             `json:"ref"`
	Content    string             `json:"content"`
	Score      float64            `json:"score"`
	ScoreParts map[string]float64 `json:"score_parts"`
	Sources    MemorySources      `json:"sources"`
	GameTime   time.Time          `json:"game_time"`
	Importance int                `json:"importance"`
}

// MemorySources cite where a recalled item came from; the lists are never
// null.
type MemorySources struct {
	JournalIDs []int64  `json:"journal_ids"`
	MessageIDs []int64  `json:"message_ids"`
	EventRefs  []string `json:"event_refs"`
}

// MessageDetail answers GET /v1/npcs/{npc}/messages/{id}.
type MessageDetail struct {
	Message Message `json:"message"`
	// ArchivedBy is the compaction that archived the message, or nil.
	ArchivedBy *sleep.Record `json:"archived_by"`
}

// EntryDetail answers GET /v1/npcs/{npc}/journal/{id}.
type EntryDetail struct {
	Entry journal.Entry `json:"entry"`
}

// MemoryDetail answers GET /v1/npcs/{npc}/memories/{id}.
type MemoryDetail struct {
	Memory Memory `json:"memory"`
}

// Memory is a long-term memory, current or superseded.
type Memory struct {
	ID           int64         `json:"id"`
	Content      string        `json:"content"`
	Entity       string        `json:"entity"`
	Key          string        `json:"key"`
	Importance   int           `json:"importance"`
	Sources      MemorySources `json:"sources"`
	ValidFrom    time.Time     `json:"valid_from"`
	SupersededAt *time.Time    `json:"superseded_at"`
	SupersededBy *int64        `json:"superseded_by"`
	LastAccessed *time.Time    `json:"last_accessed"`
	AccessCount  int           `json:"access_count"`
	GameTime     time.Time     `json:"game_time"`
	CreatedAt    time.Time     `json:"created_at"`
}

// AsOfResponse answers GET /v1/npcs/{npc}/as-of: the context at the end of
// an earlier tick (see inspect.AsOf for how it is reconstructed).
type AsOfResponse struct {
	NPC  string `json:"npc"`
	Tick int64  `json:"tick"`
	// Record is the tick as recorded, or nil when it has no record.
	Record *TickRecord `json:"record"`
	// Boundary is the newest message id written by the end of the tick.
	Boundary int64 `json:"boundary"`
	// Summary is the [CONTEXT SUMMARY] live then, or nil.
	Summary *Message `json:"summary"`
	// Messages are the other messages live then, oldest first. Their state,
	// compaction_id and masked fields are as they are now.
	Messages []Message `json:"messages"`
	// Tokens is what the summary and messages cost, unmasked.
	Tokens int `json:"tokens"`
	// Compactions counts compactions committed by the end of the tick.
	Compactions int `json:"compactions"`
	// Approximate is set when a clear of the context had to be placed in
	// time by a heuristic.
	Approximate bool `json:"approximate"`
}

// TickRecord is one non-idle tick as recorded after its commit.
type TickRecord struct {
	Tick             int64     `json:"tick"`
	At               time.Time `json:"at"`
	GameTime         time.Time `json:"game_time"`
	ContextTokens    int       `json:"context_tokens"`
	Window           int       `json:"window"`
	Utilization      float64   `json:"utilization"`
	PromptTokens     int       `json:"prompt_tokens"`
	CompletionTokens int       `json:"completion_tokens"`
	LLMCalls         int       `json:"llm_calls"`
	Actions          int       `json:"actions"`
	CompactionID     *int64    `json:"compaction_id"`
	Recovery         string    `json:"recovery"`
	FirstMessageID   int64     `json:"first_message_id"`
	LastMessageID    int64     `json:"last_message_id"`
}

// DiffResponse answers GET /v1/npcs/{npc}/compactions/{id}/diff: the "what
// did we lose" report (see inspect.Diff for the heuristic).
type DiffResponse struct {
	Compaction sleep.Record `json:"compaction"`
	// Summary is the [CONTEXT SUMMARY] the compaction wrote, or nil.
	Summary *Message `json:"summary"`
	// Replaced are the messages it archived, oldest first.
	Replaced []Message `json:"replaced"`
	// Lost are details of the replaced messages found neither in the
	// summary nor in any memory, journal entry, profile or the persona.
	Lost []inspect.Candidate `json:"lost"`
	// Kept are the others, with where they were found.
	Kept []inspect.Candidate `json:"kept"`
}

// TimelineResponse answers GET /v1/npcs/{npc}/timeline, oldest first.
type TimelineResponse struct {
	NPC string `json:"npc"`
	// Window and the thresholds are the NPC's current settings.
	Window             int                 `json:"window"`
	SleepThreshold     float64             `json:"sleep_threshold"`
	EmergencyThreshold float64             `json:"emergency_threshold"`
	Points             []inspect.TickPoint `json:"points"`
	Compactions        []inspect.Marker    `json:"compactions"`
	// Truncated is set when the range held more ticks than the limit; the
	// newest are returned.
	Truncated bool `json:"truncated"`
}
