package tick

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
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
// the ticks instead, as a sleep does: the cut planned by that tick, under
// the NPC's lock, ahead of that growth (sleep.NewPlanAhead), so that it
// ends where the next tick's compaction would have; the summary written
// outside the lock while the NPC goes on ticking; the commit under the lock
// again, archiving only the rows planned. The next tick finds the context
// compacted; or, when it comes before the summary is written, it goes on
// without the compaction while its prompt fits the window (rides), and
// otherwise waits for that summary and commits it itself (handOver), so
// that the compaction is never summarized twice.

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
// likeliest cause of a sudden jump to the emergency threshold. kept is
// the part of n that stays once the model has read them: all of a result
// of a tool exempt from masking, the placeholder of any other (unless the
// result is no larger).
func (e *Engine) awaitedTokens(c *character.Character, live []character.Message) (n, kept int) {
	for _, pc := range c.State.Awaiting.V {
		var last postedSize
		found := false
		for i := len(live) - 1; i >= 0; i-- {
			if m := &live[i]; m.Role == llm.RoleTool && m.ToolName == pc.Tool {
				last, found = postedSize{m.ViewTokens, m.MaskTokens}, true
				break
			}
		}
		if !found {
			if v, ok := e.resultSizes.Load(toolOf{c.ID, pc.Tool}); ok {
				last = v.(postedSize)
			}
		}
		n += last.view
		if c.Masking.Exempt(pc.Tool) || last.mask >= last.view {
			kept += last.view
		} else {
			kept += last.mask
		}
	}
	return n, kept
}

// postedSize is what a tool result costs in a prompt, as sent (view) and
// once masked (mask).
type postedSize struct{ view, mask int }

// toolOf keys Engine.resultSizes: an NPC's tool.
type toolOf struct{ npc, tool string }

// notePosted records what the tool results the game posted for NPC id cost
// in the prompt, for awaitedTokens.
func (e *Engine) notePosted(id string, msgs []*character.Message) {
	for _, m := range msgs {
		e.resultSizes.Store(toolOf{id, m.ToolName}, postedSize{m.ViewTokens, m.MaskTokens})
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
// emergency threshold and the next tick could not read them first
// (readFirst's rule, readsFirst: masking is off, the prompt with them would
// not fit the window, or the rest of the context, with what the results
// leave once read, is past the sleep threshold). used is the context as
// usedTokens counts it.
func (e *Engine) foresee(c *character.Character, live []character.Message, used, grew int) (foreseen int, near bool) {
	awaited, kept := e.awaitedTokens(c, live)
	readable := readsFirst(c, used+awaited, used+kept)
	near = nearEmergency(c, used, grew) || (awaited > 0 && c.OverEmergency(used+awaited) && !readable)
	return max(grew, awaited), near
}

// usedTokens is the context of c, with the live history live, as the next
// tick will measure it: without what masking the tool results the model
// has read saves (readExcess), which that tick masks first.
func usedTokens(c *character.Character, live []character.Message) int {
	return c.ContextTokens() - readExcess(c, live)
}

// besideRun is one background compaction of an NPC. c and plan are set
// before the run is stored; taken is guarded by the NPC's lock; sum and
// err are set before ready is closed.
type besideRun struct {
	c     *character.Character
	plan  *sleep.Plan
	taken bool // a tick took the run over: the run only ends
	// state tells whether the run still waits for its turn among the
	// background compactions (runQueued), has begun (runStarted), or was
	// dropped by a tick while it waited (runDropped: the tick compacts
	// itself, and abandon is closed).
	state   atomic.Int32
	abandon chan struct{}
	sum     sleep.Summary
	err     error
	ready   chan struct{} // closed once the summary is written, or the run gave up
	done    chan struct{} // closed once the run has ended
}

const (
	runQueued int32 = iota
	runStarted
	runDropped
)

// errDropped is the outcome of a run a tick dropped while it waited for
// its turn.
var errDropped = errors.New("dropped by a tick while it waited for its turn")

// compactBeside starts a background compaction of NPC after, as a tick
// (run with Config.BackgroundCompaction) just left it with the live history
// live, having grown its context from before tokens (as usedTokens counts
// it), when foresee says so; at most one runs per NPC. It is called by
// that tick, holding the NPC's lock and lease: the cut is planned there,
// from the history the tick holds, so that the next tick always finds the
// run planned (it rides it, or finishes it: see rides and handOver).
// Close cancels it and waits for it: a compaction cancelled before its
// commit changes nothing.
func (e *Engine) compactBeside(after *character.Character, live []character.Message, before int) {
	id := after.ID
	if _, running := e.compacting.Load(id); running {
		return
	}
	used := usedTokens(after, live)
	foreseen, near := e.foresee(after, live, used, used-before)
	if !near {
		return
	}
	bc, ok := e.deps.Compactor.(backgroundCompactor)
	if !ok {
		return
	}
	// The plan keeps slices of the history it is given, and the held
	// history is changed in place by the next tick (afterTurn): the plan
	// gets a copy of its own. It is made ahead of the growth it foresees,
	// so that once that has come the context is at its target, as if the
	// compaction had waited for it.
	p := sleep.NewPlanAhead(after, slices.Clone(live), sleep.TriggerBackground, foreseen)
	if p.Empty() {
		return
	}
	run := &besideRun{c: after, plan: p, abandon: make(chan struct{}), ready: make(chan struct{}), done: make(chan struct{})}
	if err := e.begin(); err != nil {
		return
	}
	e.compacting.Store(id, run)
	go func() {
		defer e.inflight.Done()
		defer close(run.done)
		defer e.compacting.CompareAndDelete(id, run)
		rec, err := e.runBeside(e.bg, bc, id, run)
		switch {
		case errors.Is(err, errDropped):
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

// runBeside writes the summary of background compaction run of NPC id
// outside the NPC's lock, then commits it under the lock, and returns the
// compaction it committed, or nil when it committed none: a tick took it
// over, or it was overtaken (another compaction or a clear archived rows
// it planned, the NPC was deleted). Nothing is changed then.
func (e *Engine) runBeside(ctx context.Context, bc backgroundCompactor, id string, run *besideRun) (*sleep.Record, error) {
	// Its turn among the background compactions (Config.BackgroundCompactions),
	// held until its commit: a burst of commits, each holding the database's
	// writer for a millisecond or more, would queue the ticks' commits
	// behind them.
	var err error
	select {
	case e.besideSlots <- struct{}{}:
		if !run.state.CompareAndSwap(runQueued, runStarted) {
			<-e.besideSlots
			err = errDropped
		}
	case <-run.abandon:
		err = errDropped
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		run.err = err
		close(run.ready)
		return nil, err
	}
	defer func() { <-e.besideSlots }()
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
		// The commit reads the NPC's state afresh while it holds the
		// writer, and its settings when they changed since the run was
		// planned; an NPC deleted meanwhile, or deleted and created
		// again, is ErrNotFound there (the plan is of a life that is
		// gone), and nothing is committed.
		rec, after, err := bc.CommitState(ctx, run.c, run.plan, run.sum)
		e.landed(rec, after, err)
		return err
	})
	if errors.Is(err, sleep.ErrStale) {
		return nil, nil
	}
	return rec, ignoreGone(err)
}

// rides reports whether a tick of c, holding the NPC's lock, whose context
// with its pending new messages is over the emergency threshold may call
// the model without compacting, because a compaction begun beside the
// ticks will land after it: one is under way, no tick took it over, its
// summary is not written yet (a written one is committed at once instead,
// by landWritten or compact, without a wait), and the whole prompt with
// the reply reserve still fits the window. The player does not wait for
// the summary then; a further step of the tick whose prompt no longer fits
// compacts first (fitStep), finishing that compaction (handOver).
func (e *Engine) rides(c *character.Character, pending int) bool {
	if !fitsWindow(c, c.ContextTokens()+pending) {
		return false
	}
	run, written := e.openRun(c.ID)
	// Not of a life of the NPC that is gone.
	return run != nil && !written && c.CreatedAt.Equal(run.c.CreatedAt)
}

// openRun returns the compaction of NPC id under way beside the ticks that
// no tick has taken over, nil when there is none, and whether its summary
// is written (or its run gave up). The caller holds the NPC's lock.
func (e *Engine) openRun(id string) (run *besideRun, written bool) {
	v, ok := e.compacting.Load(id)
	if !ok {
		return nil, false
	}
	run = v.(*besideRun)
	if run.taken {
		return nil, false
	}
	select {
	case <-run.ready:
		return run, true
	default:
		return run, false
	}
}

// landWritten commits, at the start of a tick (holding the NPC's lock), a
// compaction begun beside the ticks whose summary is written but which has
// not landed yet: its run would wait for the lock the tick holds, and the
// tick would be measured and prompted without it. Nothing waits: a summary
// still being written is left to its run (or to rides and handOver).
func (e *Engine) landWritten(ctx context.Context, ts *turnState) error {
	if run, written := e.openRun(ts.c.ID); run == nil || !written {
		return nil
	}
	rec, after, _, handled, err := e.handOver(ctx, ts.c)
	if err != nil {
		return fmt.Errorf("background compaction: %w", err)
	}
	if handled {
		ts.c, ts.comp = after, rec
	}
	return nil
}

// handOver is called by a tick of c, holding the NPC's lock, that must
// compact before it calls the model. A background compaction of the NPC
// still waiting for its turn (Config.BackgroundCompactions) is dropped,
// and the tick compacts as it would have: it does not wait for the runs
// before it. When one is writing its summary, the tick waits for it (the
// wait counted as model time, in waited) and commits it itself: handled
// is then true, and rec and after are the compaction and the NPC it left.
// A run whose summary failed, or whose plan another compaction overtook,
// is dropped: the tick then compacts as it would have.
func (e *Engine) handOver(ctx context.Context, c *character.Character) (rec *sleep.Record, after *character.Character, waited time.Duration, handled bool, err error) {
	run, _ := e.openRun(c.ID)
	if run == nil {
		return nil, nil, 0, false, nil
	}
	run.taken = true
	if run.state.CompareAndSwap(runQueued, runDropped) {
		// Still waiting for its turn: the tick compacts now rather than
		// wait for the runs before it.
		close(run.abandon)
		return nil, nil, 0, false, nil
	}
	bc, ok := e.deps.Compactor.(backgroundCompactor)
	if !ok {
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
	e.landed(rec, after, err)
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
