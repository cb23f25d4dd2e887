package character

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/npcd/npcd/internal/text"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
)

// Message states.
const (
	StateLive     = "live"
	StateArchived = "archived"
)

// SummaryPrefix starts the content of every summary message.
const SummaryPrefix = "[CONTEXT SUMMARY]"

// Message is one row of an NPC's conversation history. Rows are appended by
// ticks and archived by compactions; they are never updated in content and
// never deleted except with the NPC itself.
type Message struct {
	ID          int64  `gorm:"primaryKey;autoIncrement"`
	CharacterID string `gorm:"size:64;not null;index:idx_messages_char_state_id,priority:1"`
	State       string `gorm:"size:8;not null;default:live;index:idx_messages_char_state_id,priority:2"`
	Role        string `gorm:"size:16;not null"`
	// Summary marks a [CONTEXT SUMMARY] system message; at most one is live
	// and it is sent at the head of the history.
	Summary    bool
	Content    string
	Name       string                 `gorm:"size:64"`
	ToolCalls  store.JSON[[]ToolCall] `gorm:"type:text"`
	ToolCallID string                 `gorm:"size:128"`
	ToolName   string                 `gorm:"size:64"`
	Turn       int64
	Tick       int64
	// Tokens is the cost of the full message; ViewTokens of the message as
	// sent unmasked (smaller when Offloaded); MaskTokens of its masked
	// placeholder. All are computed once, when the row is written.
	Tokens     int
	ViewTokens int
	MaskTokens int
	// Masked hides a tool result behind a placeholder in prompts. The stored
	// content is unchanged.
	Masked    bool
	Offloaded bool
	// CompactionID is the compaction that archived the row.
	CompactionID *int64 // indexed where set (migration character v8)
	// EventRefs are the game's event ids the message was made from.
	EventRefs store.JSON[[]string]       `gorm:"type:text"`
	Metadata  store.JSON[map[string]any] `gorm:"type:text"`
	GameTime  time.Time
	CreatedAt time.Time
}

// ToolCall is a tool call made by the model, stored with its assistant
// message. Args is the raw argument text as the model produced it.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Args string `json:"args"`
}

// PromptTokens is what the message costs in a prompt as it is sent now.
func (m *Message) PromptTokens() int {
	if m.Masked {
		return m.MaskTokens
	}
	return m.ViewTokens
}

// Prompt converts the message to the form sent to the model: masked tool
// results become a placeholder naming the stored id, oversized ones are sent
// as head and tail with the id to recall the rest.
func (m *Message) Prompt() llm.Message {
	out := llm.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
	if len(m.ToolCalls.V) > 0 {
		out.ToolCalls = promptCalls(m.ToolCalls.V)
	}
	switch {
	case m.Masked:
		out.Content = MaskPlaceholder(m.ID, m.ToolName, m.Tokens)
	case m.Offloaded:
		out.Content = OffloadView(m.ID, m.Content)
	}
	return out
}

// promptCalls is calls as a prompt holds them, sharing their array: an
// llm.ToolCall is a ToolCall's three strings, in the same order, under
// other names (TestPromptCallsAreTheStoredOnes checks it). The prompt form
// of a live history is kept with it between ticks, and a copy of every
// assistant message's calls was an object more for the collector to trace
// in each. The length is the capacity, so appending to the prompt's calls
// copies them; neither side changes a call in place.
func promptCalls(calls []ToolCall) []llm.ToolCall {
	return unsafe.Slice((*llm.ToolCall)(unsafe.Pointer(unsafe.SliceData(calls))), len(calls))
}

// Full converts the message as stored, ignoring masking and offload.
func (m *Message) Full() llm.Message {
	out := llm.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
	if len(m.ToolCalls.V) > 0 {
		out.ToolCalls = promptCalls(m.ToolCalls.V)
	}
	return out
}

// MaskPlaceholder is the text sent instead of a masked tool result.
func MaskPlaceholder(id int64, tool string, tokens int) string {
	if tool == "" {
		tool = "tool"
	}
	return fmt.Sprintf("[observation masked: %s result, %d tokens; recall_archive with id %d reads it again]", tool, tokens, id)
}

// Offload sizes: how much of an oversized tool result is sent.
const (
	offloadHead = 2048
	offloadTail = 1024
)

// OffloadView is an oversized tool result as sent: its head, its tail and the
// id that recalls the whole text.
func OffloadView(id int64, content string) string {
	if len(content) <= offloadHead+offloadTail {
		return content
	}
	head := text.Truncate(content, offloadHead)
	tail := content[len(content)-offloadTail:]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	omitted := len(content) - len(head) - len(tail)
	return head + fmt.Sprintf("\n…[%d bytes omitted; the full result is stored as message %d; call recall_archive with id %d to read it]…\n", omitted, id, id) + tail
}

// Counter counts prompt tokens; *llm.Counter implements it.
type Counter interface {
	Message(m llm.Message) int
}

// Measure sets the token counts of m, which must already have its ID when it
// is a tool result (the placeholders name it). offloadBytes is the NPC's
// offload limit. It is the one place that decides what a message costs in
// a prompt (the counter only frames and tokenizes what it is given):
// PromptTokens then reads the cost of the message as it is sent now.
func Measure(m *Message, c Counter, offloadBytes int) {
	m.Tokens = c.Message(m.Full())
	m.ViewTokens = m.Tokens
	m.MaskTokens = m.Tokens
	if m.Role != llm.RoleTool {
		return
	}
	// Below head+tail an offloaded view would be the whole text anyway.
	if offloadBytes > 0 && len(m.Content) > max(offloadBytes, offloadHead+offloadTail) {
		m.Offloaded = true
		v := m.Full()
		v.Content = OffloadView(m.ID, m.Content)
		m.ViewTokens = c.Message(v)
	}
	v := m.Full()
	v.Content = MaskPlaceholder(m.ID, m.ToolName, m.Tokens)
	m.MaskTokens = c.Message(v)
}

// Text returns the call's "text" argument — what say and emote carry — or
// "" when it has none or the arguments do not parse.
func (tc ToolCall) Text() string {
	var v struct {
		Text string `json:"text"`
	}
	if json.Unmarshal([]byte(tc.Args), &v) != nil {
		return ""
	}
	return strings.TrimSpace(v.Text)
}

// ArgsJSON returns the call's arguments as JSON when they parse, or as a JSON
// string holding the raw text when they do not.
func (tc ToolCall) ArgsJSON() json.RawMessage {
	if json.Valid([]byte(tc.Args)) && strings.TrimSpace(tc.Args) != "" {
		return json.RawMessage(tc.Args)
	}
	b, _ := json.Marshal(tc.Args)
	return b
}
