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
// tick: the sleep threshold, below the emergency one, so that masking —
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
	ids := readResults(live, c.Masking.Exempt)
	if len(ids) == 0 {
		return nil
	}
	m, err := e.deps.Characters.MaskMessages(ctx, c.ID, ids)
	if err != nil {
		return fmt.Errorf("mask read tool results: %w", err)
	}
	if m.After == nil {
		return nil
	}
	// The held history, with the same rows marked masked, is the stored
	// one at the new revision.
	e.history.put(c.ID, m.After.State.HistoryRev, afterTurn(live, nil, m.IDs))
	ts.c = m.After
	return nil
}

// readResults returns the ids of the unmasked tool results in live that the
// model has read — an assistant message comes after them — whose
// placeholder is smaller, of tools not exempt.
func readResults(live []character.Message, exempt func(string) bool) []int64 {
	read := 0
	for i := len(live) - 1; i >= 0; i-- {
		if live[i].Role == llm.RoleAssistant {
			read = i
			break
		}
	}
	var ids []int64
	for i := 0; i < read; i++ {
		if maskableResult(&live[i], exempt) {
			ids = append(ids, live[i].ID)
		}
	}
	return ids
}
