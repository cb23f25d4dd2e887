package tick

import (
	"context"
	"fmt"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
)

// overMaskMark reports whether a prompt of tokens has passed the mark from
// which the tool results the model has already read are masked before the
// tick: the compaction target (half the window by default), below the
// sleep and emergency thresholds, so that masking —
// which loses nothing, the result staying in the archive and its id in the
// placeholder — makes room before a compaction is needed.
func overMaskMark(c *character.Character, tokens int) bool {
	return tokens > sleep.TargetTokens(c)
}

// maskRead masks, before the model call, the live tool results the model
// has read (an assistant message follows them) when the context with the
// tick's new messages has passed the mask mark. Results of exempt tools and
// results not read yet are left alone.
func (e *Engine) maskRead(ctx context.Context, ts *turnState, pending int) error {
	c := ts.c
	if !c.Masking.On() || !overMaskMark(c, c.ContextTokens()+pending) {
		return nil
	}
	live, err := e.liveHistory(ctx, c)
	if err != nil {
		return err
	}
	if err := e.maskHeld(ctx, ts, live, readResults(live, c.Masking.Exempt)); err != nil {
		return fmt.Errorf("mask read tool results: %w", err)
	}
	return nil
}

// maskAll masks, before the model call of a tick whose context is at the
// emergency threshold, every tool result of the NPC before its current
// turn (as sleep.Compactor.Mask does when aggressive), except those of exempt
// tools: the ones the live history shows, so that a tick finds out from
// memory that there are none, as most ticks there do (their results were
// masked by policy or are exempt).
func (e *Engine) maskAll(ctx context.Context, ts *turnState) error {
	c := ts.c
	if !c.Masking.On() {
		return nil
	}
	live, err := e.liveHistory(ctx, c)
	if err != nil {
		return err
	}
	return e.maskHeld(ctx, ts, live, maskableIDs(live, nil, c.State.Turn, c.Masking.Exempt))
}

// maskHeld masks the tool results ids of the live history live of the NPC
// a tick holds (ts.c), which leaves the history held in memory with the
// same rows marked masked, at the new revision, and ts.c as masking left
// it.
func (e *Engine) maskHeld(ctx context.Context, ts *turnState, live []character.Message, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	c := ts.c
	m, err := e.deps.Characters.MaskMessages(ctx, c.ID, ids)
	if err != nil {
		return err
	}
	if m.After == nil {
		return nil
	}
	e.history.put(c.ID, m.After.State.HistoryRev, afterTurn(live, nil, m.IDs))
	ts.c = m.After
	return nil
}

// readEnd is the index of the last assistant message in live, 0 when there
// is none: the tool results before it are those the model has read.
func readEnd(live []character.Message) int {
	for i := len(live) - 1; i >= 0; i-- {
		if live[i].Role == llm.RoleAssistant {
			return i
		}
	}
	return 0
}

// readExcess is what the unmasked tool results in live that the model has
// read (those readResults returns) cost beyond their placeholders: what
// maskRead saves at the next tick past the mask mark. It is 0 with masking
// off.
func readExcess(c *character.Character, live []character.Message) int {
	if !c.Masking.On() {
		return 0
	}
	n := 0
	for i := range readEnd(live) {
		if maskableResult(&live[i], c.Masking.Exempt) {
			n += live[i].ViewTokens - live[i].MaskTokens
		}
	}
	return n
}

// readResults returns the ids of the unmasked tool results in live that the
// model has read — an assistant message comes after them — whose
// placeholder is smaller, of tools not exempt.
func readResults(live []character.Message, exempt func(string) bool) []int64 {
	var ids []int64
	for i := range readEnd(live) {
		if maskableResult(&live[i], exempt) {
			ids = append(ids, live[i].ID)
		}
	}
	return ids
}

// readFirst reports whether a tick over the emergency threshold may call
// the model before compacting, because the tool results it has not read yet
// are all that put the context there. Two conditions: the whole prompt with
// the reply reserve fits the window, and without what masking those
// results saves once they are read the context (with the tick's pending new
// messages) is back under the sleep threshold, leaving the band up to the
// emergency threshold for the next turns. Deferring with the rest of the
// context already past the sleep threshold would mostly postpone the
// compaction by a tick, at the cost of a near-full prompt.
// Compacting now instead would summarize history for the sake of results
// that masking shrinks on the next tick anyway. It needs masking on: with
// masking off nothing shrinks them once read. Results of exempt tools count
// as history, since routine masking spares them.
// The live history is read only when the prompt fits at all (the tick reads
// it next anyway, from memory as a rule).
func (e *Engine) readFirst(ctx context.Context, c *character.Character, pending int) (bool, error) {
	if !mayFit(c, pending) {
		return false, nil
	}
	live, err := e.liveHistory(ctx, c)
	if err != nil {
		return false, err
	}
	return mayReadFirst(c, live, pending), nil
}

// mayFit is readFirst's first condition, which needs no history: masking
// is on and the whole prompt with the reply reserve fits the window.
func mayFit(c *character.Character, pending int) bool {
	return c.Masking.On() && fitsWindow(c, c.ContextTokens()+pending)
}

// mayReadFirst is readFirst's rule on c's live history.
func mayReadFirst(c *character.Character, live []character.Message, pending int) bool {
	if !mayFit(c, pending) {
		return false
	}
	total := c.ContextTokens() + pending
	return readsFirst(c, total, total-unreadExcess(live, c.Masking.Exempt))
}

// readsFirst is readFirst's rule on a context of total tokens, of which
// rest remain without what masking the unread tool results saves once they
// are read: masking is on, total with the reply reserve fits the window,
// and rest is under the sleep threshold. foresee applies it to the results
// a tick awaits.
func readsFirst(c *character.Character, total, rest int) bool {
	return c.Masking.On() && fitsWindow(c, total) && float64(rest) < c.Compaction.SleepThreshold*float64(c.ContextWindow)
}

// fitsWindow reports whether a prompt of tokens (ContextTokens plus what a
// tick adds; the reply priming is part of SystemTokens) leaves the reply
// reserve, MaxOutputTokens, within the window.
func fitsWindow(c *character.Character, tokens int) bool {
	return tokens+c.MaxOutputTokens <= c.ContextWindow
}

// unreadExcess is what the tool results in live the model has not read yet
// (those after the last assistant message) cost beyond their placeholders:
// what routine masking saves once the model has read them. Only results
// masking would shrink count (maskableResult).
func unreadExcess(live []character.Message, exempt func(string) bool) int {
	n := 0
	for i := len(live) - 1; i >= 0 && live[i].Role != llm.RoleAssistant; i-- {
		if maskableResult(&live[i], exempt) {
			n += live[i].ViewTokens - live[i].MaskTokens
		}
	}
	return n
}

// fitStep runs, before a further step of a tick that skipped its emergency
// compaction (ts.deferred), the compaction it skipped if the step's
// prompt (msgs, with the tool definitions) and the reply reserve no longer
// fit the window: the turn's new messages have grown it. It does so once;
// ts.live is then the history after.
func (e *Engine) fitStep(ctx context.Context, ts *turnState, msgs []llm.Message) error {
	c := ts.c
	if e.deps.Compactor == nil || fitsWindow(c, e.Counter(c.Model).Messages(msgs)+c.State.ToolTokens) {
		return nil
	}
	ts.deferred = false
	rec, after, err := e.compact(ctx, ts, sleep.TriggerEmergency, nil)
	if err != nil {
		return fmt.Errorf("emergency compaction: %w", err)
	}
	if rec == nil {
		return nil
	}
	ts.c, ts.comp = after, rec
	ts.live, err = e.liveHistory(ctx, ts.c)
	return err
}
