package tick

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
)

// Background compaction. A tick that finds its context at the emergency
// threshold compacts before it calls the model, and the one who spoke to
// the NPC waits for the summary (with a remote model, a call of its own,
// seconds long). When a tick leaves the context past the sleep threshold
// and so close to the emergency threshold that the next tick like it, or
// the tool results it awaits, would reach it, the engine compacts beside
// the ticks instead, as a sleep does: the cut planned under the NPC's lock,
// ahead of that growth (sleep.NewPlanAhead), so that it ends where the next
// tick's compaction would have; the summary written outside the lock while
// the NPC goes on ticking; the commit under the lock again, archiving only
// the rows planned. The next tick finds the context compacted; or,
// when it comes before the summary is written and needs the compaction, it
// waits for that summary and commits it itself (handOver), so that the
// compaction is never summarized twice.

// backgroundCompactor is a Compactor that compacts in the steps a sleep
// uses (*sleep.Compactor is one).
type backgroundCompactor interface {
	Pinned(ctx context.Context, p *sleep.Plan) ([]string, error)
	Summarize(ctx context.Context, c *character.Character, p *sleep.Plan, pinned []string) sleep.Summary
	CommitState(ctx context.Context, c *character.Character, p *sleep.Plan, s sleep.Summary) (*sleep.Record, *character.Character, error)
}

// aheadTicks is how many more ticks growing the context as much as the
// last one are foreseen: from when the next would reach the emergency
// threshold, the compaction starts beside the ticks. Foreseeing more would
// start compactions earlier, and so more of them over a life.
const aheadTicks = 1

// nearEmergency reports whether a tick that grew its NPC's context by grew
// tokens, leaving it at used, calls for a compaction beside the ticks: the
// context is past the sleep threshold, and aheadTicks more ticks like it
// would reach the emergency threshold. Both are counted without the tool
// results the model has read (readExcess), which the next tick masks before
// it measures the context: a large observation the model has just read is
// no growth to foresee. A tick that added nothing (or masked more than it
// added) foresees none.
func nearEmergency(c *character.Character, used, grew int) bool {
	return grew > 0 && float64(used) >= c.Compaction.SleepThreshold*float64(c.ContextWindow) && c.OverEmergency(used+aheadTicks*grew)
}

// awaitedTokens foresees what the results of the calls c awaits (those of
// returns:true tools, which the game posts before the next tick) will add
// to its context: for each, what the last result of the same tool cost,
// in live or, once compacted away, as the engine last saw one posted
// (resultSizes); 0 for a tool never answered. A long observation is the
// likeliest cause of a sudden jump to the emergency threshold.
func (e *Engine) awaitedTokens(c *character.Character, live []character.Message) int {
	n := 0
	for _, pc := range c.State.Awaiting.V {
		last, found := 0, false
		for i := len(live) - 1; i >= 0; i-- {
			if m := &live[i]; m.Role == llm.RoleTool && m.ToolName == pc.Tool {
				last, found = m.ViewTokens, true
				break
			}
		}
		if !found {
			if v, ok := e.resultSizes.Load(toolOf{c.ID, pc.Tool}); ok {
				last = v.(int)
			}
		}
		n += last
	}
	return n
}

// toolOf keys Engine.resultSizes: an NPC's tool.
type toolOf struct{ npc, tool string }

// notePosted records what the tool results the game posted for NPC id cost
// in the prompt, for awaitedTokens.
func (e *Engine) notePosted(id string, msgs []*character.Message) {
	for _, m := range msgs {
		e.resultSizes.Store(toolOf{id, m.ToolName}, m.ViewTokens)
	}
}

// forgetPosted drops what notePosted recorded of NPC id.
func (e *Engine) forgetPosted(id string) {
	e.resultSizes.Range(func(k, _ any) bool {
		if k.(toolOf).npc == id {
			e.resultSizes.Delete(k)
		}
		return true
	})
}

// foresee reports whether NPC c, with the live history live, after a tick
// that grew its context by grew tokens, calls for a compaction beside the
// ticks (near), and the growth that compaction plans ahead of (foreseen):
// the larger of a tick like the last and the results c awaits. Either may
// call for it: a tick like the last past the sleep threshold
// (nearEmergency), or the awaited results (awaitedTokens), which come
// before the next tick for sure, when they will take the context to the
// emergency threshold and the next tick could not read them first (see
// readFirst: the prompt with them would not fit the window, or the rest of
// the context is past the sleep threshold). used is the context as
// usedTokens counts it.
func (e *Engine) foresee(c *character.Character, live []character.Message, used, grew int) (foreseen int, near bool) {
	awaited := e.awaitedTokens(c, live)
	readable := fitsWindow(c, used+awaited) && float64(used) < c.Compaction.SleepThreshold*float64(c.ContextWindow)
	near = nearEmergency(c, used, grew) || (awaited > 0 && c.OverEmergency(used+awaited) && !readable)
	return max(grew, awaited), near
}

// usedTokens is the context of c, with the live history live, as the next
// tick will measure it: without what masking the tool results the model
// has read saves (readExcess), which that tick masks first.
func usedTokens(c *character.Character, live []character.Message) int {
	return c.ContextTokens() - readExcess(c, live)
}

// besideRun is one background compaction of an NPC. planned and taken are
// guarded by the NPC's lock; plan and c are set before planned; sum and
// err before ready is closed.
type besideRun struct {
	grew    int  // what the tick that began the run added to the context
	planned bool // the cut is planned; the summary is being written
	taken   bool // a tick took the run over (or dropped it): the run only ends
	c       *character.Character
	plan    *sleep.Plan
	sum     sleep.Summary
	err     error
	ready   chan struct{} // closed once the summary is written, or the run gave up
	done    chan struct{} // closed once the run has ended
}

// compactBeside starts a background compaction of NPC after, as a tick
// (run with Config.BackgroundCompaction) just left it with the live history
// live, having grown its context from before tokens (as usedTokens counts
// it), when foresee says so; at most one runs per NPC.
// Close cancels it and waits for it: a compaction cancelled before its
// commit changes nothing.
func (e *Engine) compactBeside(after *character.Character, live []character.Message, before int) {
	used := usedTokens(after, live)
	grew := used - before
	if _, near := e.foresee(after, live, used, grew); !near {
		return
	}
	bc, ok := e.deps.Compactor.(backgroundCompactor)
	if !ok {
		return
	}
	id := after.ID
	run := &besideRun{grew: grew, ready: make(chan struct{}), done: make(chan struct{})}
	if _, running := e.compacting.LoadOrStore(id, run); running {
		return
	}
	if err := e.begin(); err != nil {
		e.compacting.CompareAndDelete(id, run)
		close(run.done)
		return
	}
	go func() {
		defer e.inflight.Done()
		defer close(run.done)
		defer e.compacting.CompareAndDelete(id, run)
		rec, err := e.runBeside(e.bg, bc, id, run)
		switch {
		case err != nil:
			if e.bg.Err() == nil {
				e.deps.Log.Warn().Err(err).Str("npc", id).Msg("background compaction failed; the next tick at the emergency threshold compacts")
			}
		case rec != nil:
			e.deps.Log.Info().Str("npc", id).Str("trigger", rec.Trigger).Int("messages", rec.MessagesCompacted).
				Int("tokens_before", rec.TokensBefore).Int("tokens_after", rec.TokensAfter).Str("summarizer", rec.Summarizer).Msg("compacted")
			if e.deps.Observer != nil {
				e.deps.Observer.CompactionDone(rec.Trigger)
			}
		}
	}()
}

// runBeside runs background compaction run of NPC id and returns the
// compaction it committed, or nil when it committed none: none was needed
// any more (a tick or a sleep compacted meanwhile), a tick took it over, or
// it was overtaken (another compaction or a clear archived rows it planned,
// the NPC was deleted). Nothing is changed then.
func (e *Engine) runBeside(ctx context.Context, bc backgroundCompactor, id string, run *besideRun) (*sleep.Record, error) {
	err := e.withNPC(ctx, id, func(ctx context.Context) error {
		if run.taken {
			return nil
		}
		c, err := e.deps.Characters.Get(ctx, id)
		if err != nil {
			return err
		}
		live, err := e.liveHistory(ctx, c)
		if err != nil {
			return err
		}
		// Still needed: a tick or a sleep may have compacted meanwhile.
		foreseen, near := e.foresee(c, live, usedTokens(c, live), run.grew)
		if !near {
			return nil
		}
		// The plan keeps slices of the history it is given, and the held
		// history is changed in place by the next tick (afterTurn): the
		// plan gets a copy of its own. It is made ahead of the growth it
		// foresees, so that once that has come the context is at its
		// target, as if the compaction had waited for it.
		p := sleep.NewPlanAhead(c, slices.Clone(live), sleep.TriggerBackground, foreseen)
		if p.Empty() {
			return nil
		}
		run.c, run.plan, run.planned = c, p, true
		return nil
	})
	if err != nil || run.plan == nil {
		close(run.ready)
		return nil, ignoreGone(err)
	}
	pinned, err := bc.Pinned(ctx, run.plan)
	if err == nil {
		run.sum = bc.Summarize(ctx, run.c, run.plan, pinned)
	}
	run.err = err
	close(run.ready)
	if err != nil {
		return nil, err
	}
	var rec *sleep.Record
	err = e.withNPC(ctx, id, func(ctx context.Context) error {
		if run.taken {
			return nil
		}
		run.taken = true
		fresh, err := e.deps.Characters.Get(ctx, id)
		if err != nil {
			return err
		}
		if !fresh.CreatedAt.Equal(run.c.CreatedAt) {
			return nil // deleted and created again: the plan is of a life that is gone
		}
		rec, _, err = bc.CommitState(ctx, fresh, run.plan, run.sum)
		return err
	})
	if errors.Is(err, sleep.ErrStale) {
		return nil, nil
	}
	return rec, ignoreGone(err)
}

// handOver is called by a tick of c, holding the NPC's lock, that must
// compact before it calls the model. When a background compaction of the
// NPC is writing its summary, the tick waits for it (the wait counted as
// model time, in waited) and commits it itself: handled is then true, and
// rec and after are the compaction and the NPC it left. A run not planned
// yet is dropped (it ends once it has the lock), as is one whose summary
// failed or whose plan another compaction overtook: the tick then compacts
// as it would have.
func (e *Engine) handOver(ctx context.Context, c *character.Character) (rec *sleep.Record, after *character.Character, waited time.Duration, handled bool, err error) {
	v, ok := e.compacting.Load(c.ID)
	if !ok {
		return nil, nil, 0, false, nil
	}
	run := v.(*besideRun)
	if run.taken {
		return nil, nil, 0, false, nil
	}
	run.taken = true
	bc, ok := e.deps.Compactor.(backgroundCompactor)
	if !run.planned || !ok {
		return nil, nil, 0, false, nil
	}
	start := e.deps.Clock.Now()
	if e.handingOver != nil {
		e.handingOver()
	}
	select {
	case <-run.ready:
	case <-ctx.Done():
		return nil, nil, e.deps.Clock.Since(start), false, ctx.Err()
	}
	waited = e.deps.Clock.Since(start)
	if run.err != nil || !c.CreatedAt.Equal(run.c.CreatedAt) {
		return nil, nil, waited, false, nil
	}
	rec, after, err = bc.CommitState(ctx, c, run.plan, run.sum)
	if errors.Is(err, sleep.ErrStale) {
		return nil, nil, waited, false, nil
	}
	return rec, after, waited, err == nil, err
}

// Compacting returns a channel closed once no background compaction of NPC
// id runs: already closed when none does. A benchmark or a test that ticks
// an NPC again at once waits on it, as a game's next tick of the NPC,
// seconds later, would find the compaction done.
func (e *Engine) Compacting(id string) <-chan struct{} {
	if v, ok := e.compacting.Load(id); ok {
		return v.(*besideRun).done
	}
	return closedChan
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// ignoreGone is err, unless it says the NPC is gone: a background
// compaction of an NPC deleted meanwhile has nothing left to do.
func ignoreGone(err error) error {
	if errors.Is(err, character.ErrNotFound) {
		return nil
	}
	return err
}
