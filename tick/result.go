package tick

import (
	"context"
	"fmt"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/sleep"
)

// Result is what one tick did, in the shape of the API's tick response.
type Result struct {
	NPC  string `json:"npc"`
	Tick int64  `json:"tick"`
	// Idle is true when there was nothing to answer: no model call was made
	// and nothing was written.
	Idle bool `json:"idle"`
	// Actions are the game tool calls for the game to perform, in order.
	Actions []Action `json:"actions"`
	// Awaiting lists call ids of returns:true tools whose results the game
	// must post before the turn can go on.
	Awaiting []string `json:"awaiting"`
	// Text is the model's free text of the final step, if it wrote any
	// (models sometimes answer in prose instead of calling say).
	Text       string      `json:"text,omitempty"`
	Context    Context     `json:"context"`
	Compaction *Compaction `json:"compaction"`
	Usage      Usage       `json:"usage"`
	// Recovery says how a context overflow reported by the provider was
	// handled: "compacted" (compact and retry) or "newest_turn_only".
	Recovery string `json:"recovery,omitempty"`
	// InvalidCalls counts tool calls refused for bad arguments or unknown
	// tools; they were answered to the model and never reached the game.
	InvalidCalls int      `json:"invalid_calls"`
	Warnings     []string `json:"warnings,omitempty"`
	// Events is how many perceived events this tick consumed.
	Events int `json:"events"`
	// modelTime is the time the tick spent in model calls (its log line).
	modelTime time.Duration
}

// Action is one game tool call.
type Action struct {
	CallID string         `json:"call_id"`
	Tool   string         `json:"tool"`
	Args   map[string]any `json:"args"`
}

// Context describes an NPC's context budget.
type Context struct {
	Tokens           int     `json:"tokens"`
	Window           int     `json:"window"`
	Utilization      float64 `json:"utilization"`
	SummaryTokens    int     `json:"summary_tokens"`
	SystemTokens     int     `json:"system_tokens"`
	ToolTokens       int     `json:"tool_tokens"`
	HistoryTokens    int     `json:"history_tokens"`
	HistoryBudget    int     `json:"history_budget"`
	MaxOutputTokens  int     `json:"max_output_tokens"`
	LiveMessages     int     `json:"live_messages"`
	ArchivedMessages int     `json:"archived_messages"`
	Compactions      int     `json:"compactions"`
}

// ContextOf reports c's budget from its running totals.
func ContextOf(c *character.Character) Context {
	return Context{
		Tokens:           c.ContextTokens(),
		Window:           c.ContextWindow,
		Utilization:      round3(c.Utilization()),
		SummaryTokens:    c.State.SummaryTokens,
		SystemTokens:     c.State.SystemTokens,
		ToolTokens:       c.State.ToolTokens,
		HistoryTokens:    c.State.LiveTokens,
		HistoryBudget:    c.HistoryBudget(),
		MaxOutputTokens:  c.MaxOutputTokens,
		LiveMessages:     c.State.LiveMessages,
		ArchivedMessages: c.State.ArchivedMessages,
		Compactions:      c.State.Compactions,
	}
}

func round3(f float64) float64 { return float64(int(f*1000+0.5)) / 1000 }

// Usage is what a tick cost in model tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	LLMCalls         int `json:"llm_calls"`
}

// Compaction summarizes a compaction for a tick response.
type Compaction struct {
	ID                int64  `json:"id"`
	Trigger           string `json:"trigger"`
	TokensBefore      int    `json:"tokens_before"`
	TokensAfter       int    `json:"tokens_after"`
	MessagesCompacted int    `json:"messages_compacted"`
	Summarizer        string `json:"summarizer"`
}

// CompactionOf converts a compaction record.
func CompactionOf(r *sleep.Record) *Compaction {
	if r == nil {
		return nil
	}
	return &Compaction{ID: r.ID, Trigger: r.Trigger, TokensBefore: r.TokensBefore, TokensAfter: r.TokensAfter,
		MessagesCompacted: r.MessagesCompacted, Summarizer: r.Summarizer}
}

// RewriteWarningAfter is the number of compactions after which responses warn
// that the summary has been rewritten many times.
const RewriteWarningAfter = 3

// Warnings returns the warnings an NPC's state deserves.
func Warnings(c *character.Character) []string {
	var w []string
	if n := c.State.Compactions; n >= RewriteWarningAfter {
		w = append(w, fmt.Sprintf("the context summary has been rewritten %d times; details may have drifted (archived messages and memories keep the originals)", n))
	}
	// Why the last compaction missed its target matters while the
	// context is still over it.
	if c.State.CompactionNote != "" && c.ContextTokens() > sleep.TargetTokens(c) {
		w = append(w, c.State.CompactionNote)
	}
	return w
}

// Compactor keeps an NPC's context within its window. The caller holds the
// NPC's lock.
type Compactor interface {
	// Compact summarizes and archives the older part of the live history
	// now. It returns the compaction, nil when nothing could be compacted,
	// and the NPC as it left it (c itself when it changed nothing).
	Compact(ctx context.Context, c *character.Character, trigger, instruction string) (*sleep.Record, *character.Character, error)
}
