package inspect

import (
	"context"
	"math"

	"github.com/npcd/npcd/character"
)

// AsOf is an NPC's context as it was at the end of one tick: the summary
// and the live history the next model call would have started from, had
// nothing happened after that tick.
//
// It is reconstructed from the rows, which are never rewritten: a message
// was live at the end of tick T when it was written by then (its id is at
// most the newest id written by ticks up to T: Boundary) and was not yet
// archived by a compaction committed by then (one whose summary message
// is at most Boundary; a compaction without a summary message counts as
// committed when it ran after an earlier tick). A clear (DELETE
// /v1/npcs/{npc}/context) writes no compaction record; a message it
// archived counts as archived at T when a message written after the clear
// is at most Boundary. Two clears with no message left live between them
// look like one, so a message the first archived may be shown as live
// until the second: Approximate is set when a message a clear archived
// later is shown as live. Masked flags are as they are now: masking is not
// recorded per tick.
type AsOf struct {
	Tick int64 `json:"tick"`
	// Record is the tick as recorded (context tokens and utilization after
	// its commit); nil when the tick has no record.
	Record *character.TickRecord `json:"-"`
	// Boundary is the newest message id written by the end of the tick.
	Boundary int64 `json:"boundary"`
	// Summary is the [CONTEXT SUMMARY] live at the end of the tick, or nil.
	Summary *character.Message `json:"-"`
	// Messages are the other live messages, oldest first.
	Messages []character.Message `json:"-"`
	// Tokens is what the summary and Messages cost, unmasked.
	Tokens int `json:"tokens"`
	// Compactions counts compactions committed by the end of the tick.
	Compactions int `json:"compactions"`
	// Approximate is set when a message a clear archived later is shown as
	// live (see above).
	Approximate bool `json:"approximate"`
}

// AsOf reconstructs NPC npc's context at the end of tick. A tick after the
// NPC's latest is a NotFoundError.
func (in *Inspector) AsOf(ctx context.Context, npc string, tick int64) (*AsOf, error) {
	c, err := in.chars.Get(ctx, npc)
	if err != nil {
		return nil, err
	}
	if tick < 1 || tick > c.State.Tick {
		return nil, notFound(npc, "tick %d", tick)
	}
	out := &AsOf{Tick: tick, Messages: []character.Message{}}
	recs, err := in.chars.Ticks(ctx, npc, tick, tick)
	if err != nil {
		return nil, err
	}
	if len(recs) == 1 {
		out.Record = &recs[0]
	}
	if out.Boundary, err = in.chars.WrittenBy(ctx, npc, tick); err != nil {
		return nil, err
	}
	byID, _, err := in.allCompactions(ctx, npc)
	if err != nil {
		return nil, err
	}
	committed := func(id int64) bool {
		r, ok := byID[id]
		if !ok {
			return false
		}
		if r.SummaryMessageID > 0 {
			return r.SummaryMessageID <= out.Boundary
		}
		return r.Tick < tick
	}
	for _, r := range byID {
		if committed(r.ID) {
			out.Compactions++
		}
	}
	rows, err := in.chars.MessageStates(ctx, npc, out.Boundary)
	if err != nil {
		return nil, err
	}
	// A message archived by a clear counts as archived at the tick when a
	// message not archived by that clear (so written after it) was written
	// by then: scan backwards remembering the nearest such message.
	cleared := func(r character.MessageState) bool {
		return r.State == character.StateArchived && r.CompactionID == nil
	}
	live := make([]bool, len(rows))
	next := int64(math.MaxInt64)
	for i := len(rows) - 1; i >= 0; i-- {
		r := rows[i]
		switch {
		case cleared(r):
			live[i] = next > out.Boundary
			out.Approximate = out.Approximate || live[i]
		case r.State == character.StateArchived:
			live[i] = !committed(*r.CompactionID)
			next = r.ID
		default:
			live[i] = true
			next = r.ID
		}
	}
	var ids []int64
	var summaryID int64
	for i, r := range rows {
		if !live[i] {
			continue
		}
		if r.Summary {
			summaryID = r.ID // the newest live summary, should there be two
			continue
		}
		ids = append(ids, r.ID)
	}
	if summaryID != 0 {
		ids = append(ids, summaryID)
	}
	ms, err := in.chars.MessagesByID(ctx, npc, ids)
	if err != nil {
		return nil, err
	}
	for i := range ms {
		out.Tokens += ms[i].Tokens
		if ms[i].ID == summaryID {
			m := ms[i]
			out.Summary = &m
			continue
		}
		out.Messages = append(out.Messages, ms[i])
	}
	return out, nil
}
