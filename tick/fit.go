package tick

import (
	"fmt"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/tools"
)

// MinTurnTokens is the room one turn's perceived events need in the
// prompt, beyond max_output_tokens for the reply.
const MinTurnTokens = 256

// Fit is what an NPC's settings cost in every prompt and how that compares
// with its compaction target.
type Fit struct {
	// SystemTokens and ToolTokens are the persona with npcd's instructions,
	// and the tool definitions, as the model is sent them.
	SystemTokens, ToolTokens int
	// Needed is the fixed part plus a summary and one turn: the system
	// text, the tools, the summary's budget, max_output_tokens and
	// MinTurnTokens.
	Needed int
	// Target is the compaction target: the sleep threshold of the window,
	// the most a compaction leaves.
	Target int
	// MinWindow is the smallest context_window these settings fit, or 0
	// when none does.
	MinWindow int
}

// CheckFit measures the fixed part of NPC c's prompt (c after defaults,
// set its compiled tools) and refuses settings that leave no room for a
// summary and a turn below the compaction target: with them every tick
// would compact and still not fit. The refusal is a *character.UnfitError
// naming the field to change (persona when it is most of the cost, else
// context_window) and saying how much room is needed and the smallest
// window that fits. The API and the scenario loader both check settings
// here.
func CheckFit(c *character.Character, set *tools.Set, counter *llm.Counter) (Fit, error) {
	f := Fit{
		SystemTokens: counter.Message(llm.Message{Role: llm.RoleSystem, Content: SystemPrompt(c)}) + llm.ReplyPriming,
		ToolTokens:   counter.Tools(set.Definitions()),
	}
	fixed := f.SystemTokens + f.ToolTokens + c.MaxOutputTokens + MinTurnTokens
	need := func(w int) int { return fixed + summaryBudget(w) }
	target := func(w int) int { return int(c.Compaction.SleepThreshold * float64(w)) }
	f.Needed, f.Target = need(c.ContextWindow), target(c.ContextWindow)
	// target grows faster than the summary budget (a tenth of the window at
	// most), so the windows that fit are all those from the smallest one.
	if lo, hi := character.MinContextWindow, character.MaxContextWindow; need(hi) <= target(hi) {
		for lo < hi {
			mid := lo + (hi-lo)/2
			if need(mid) <= target(mid) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		f.MinWindow = lo
	}
	if f.Needed <= f.Target {
		return f, nil
	}
	persona := counter.Text(c.Persona)
	field := "context_window"
	if 2*persona > f.SystemTokens+f.ToolTokens {
		field = "persona"
	}
	msg := fmt.Sprintf("the persona with npcd's instructions (%d tokens), the tools (%d), a summary (%d), max_output_tokens (%d) and one turn (%d) need %d tokens, "+
		"more than the compaction target of this window (compaction.sleep_threshold %.2f × %d = %d), so every tick would compact",
		f.SystemTokens, f.ToolTokens, summaryBudget(c.ContextWindow), c.MaxOutputTokens, MinTurnTokens, f.Needed,
		c.Compaction.SleepThreshold, c.ContextWindow, f.Target)
	if f.MinWindow > 0 {
		msg += fmt.Sprintf("; these settings need a context_window of at least %d", f.MinWindow)
	} else {
		msg += "; no context_window fits these settings"
	}
	if field == "persona" {
		msg += fmt.Sprintf(", or a persona about %d tokens shorter", f.Needed-f.Target)
	}
	return f, &character.UnfitError{Field: field, Message: msg}
}

// summaryBudget is sleep.SummaryBudgetFor for a window.
func summaryBudget(window int) int {
	return sleep.SummaryBudgetFor(&character.Character{ContextWindow: window})
}
