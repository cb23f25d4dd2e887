package tick

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/npcd/npcd/character"
)

// Auto-tick: an NPC whose settings enable it is ticked by npcd once input
// (events, or the last awaited tool result) has arrived and its inbox has
// been quiet for the debounce, or at the latest max_wait after the first
// pending input. The tick is an ordinary one (TickWithKey without a key):
// it takes the NPC's lock, so it never runs beside a manual tick of the
// same NPC, and a manual tick that consumed the input first leaves it an
// idle tick that writes nothing. Its actions reach the game through the
// action feed.

// autoRetryMax bounds the wait before an auto-tick that failed (a model
// out of reach) is tried again; the wait doubles from max_wait up to it.
const autoRetryMax = time.Minute

// autoTicker holds the timers of the NPCs with input waiting for an
// auto-tick. An entry lives from the first input to the tick that leaves
// nothing pending.
type autoTicker struct {
	mu     sync.Mutex
	npcs   map[string]*autoNPC
	closed bool
	wg     sync.WaitGroup // running auto-ticks
	// slots bounds the auto-ticks running at once, as a batch tick's
	// workers are bounded: a thousand NPCs due together queue here rather
	// than all contend for the database.
	slots chan struct{}
	// hook, when set (tests), is called after each auto-tick.
	hook func(id string, r *Result, err error)
}

type autoNPC struct {
	set     character.AutoTickSettings
	first   time.Time // first input not yet answered; zero when none
	timer   clockwork.Timer
	running bool // a tick is running; input meanwhile sets again
	again   bool
	againAt time.Time // when again was set
	fails   int       // auto-ticks failed in a row
}

func newAutoTicker() *autoTicker {
	return &autoTicker{npcs: map[string]*autoNPC{}, slots: make(chan struct{}, MaxBatchWorkers)}
}

// autoNote tells the auto-ticker that input for c arrived now.
func (e *Engine) autoNote(c *character.Character) {
	if !c.AutoTick.Enabled {
		return
	}
	a := e.auto
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	n := a.npcs[c.ID]
	if n == nil {
		n = &autoNPC{}
		a.npcs[c.ID] = n
	}
	n.set = c.AutoTick
	now := e.deps.Clock.Now()
	if n.running {
		if !n.again {
			n.again, n.againAt = true, now
		}
		return
	}
	if n.first.IsZero() {
		n.first = now
	}
	e.arm(c.ID, n, now)
}

// arm (re)starts n's timer for its next due time: the debounce after now,
// but no later than max_wait after the first input. a.mu is held.
func (e *Engine) arm(id string, n *autoNPC, now time.Time) {
	due := now.Add(time.Duration(n.set.DebounceMS) * time.Millisecond)
	if limit := n.first.Add(time.Duration(n.set.MaxWaitMS) * time.Millisecond); limit.Before(due) {
		due = limit
	}
	e.armIn(id, n, due.Sub(now))
}

func (e *Engine) armIn(id string, n *autoNPC, d time.Duration) {
	if n.timer != nil {
		n.timer.Stop()
	}
	n.timer = e.deps.Clock.AfterFunc(max(d, 0), func() { e.autoFire(id, n) })
}

// autoFire runs the tick of an NPC whose timer went off.
func (e *Engine) autoFire(id string, n *autoNPC) {
	a := e.auto
	a.mu.Lock()
	if a.closed || a.npcs[id] != n || n.running {
		a.mu.Unlock()
		return
	}
	n.running, n.again, n.first, n.timer = true, false, time.Time{}, nil
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		a.slots <- struct{}{}
		res, err := e.TickWithKey(context.Background(), id, "")
		<-a.slots
		pending := false
		if err == nil && !res.Idle {
			// A turn's events are bounded: what it left waits for no new
			// input to be answered.
			cnt, cerr := e.deps.Characters.PendingCount(context.Background(), id)
			pending = cerr == nil && cnt > 0
		}
		if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, character.ErrNotFound) {
			e.deps.Log.Warn().Err(err).Str("npc", id).Msg("auto-tick failed; input stays pending")
		}
		if a.hook != nil {
			a.hook(id, res, err)
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		n.running = false
		now := e.deps.Clock.Now()
		switch {
		case a.closed || errors.Is(err, ErrClosed) || errors.Is(err, character.ErrNotFound):
			delete(a.npcs, id)
		case err != nil:
			// Retry later, backing off; new input does not hurry it.
			n.fails++
			wait := time.Duration(n.set.MaxWaitMS) * time.Millisecond << min(n.fails-1, 10)
			n.first = now
			e.armIn(id, n, min(max(wait, time.Second), autoRetryMax))
		case n.again || pending:
			n.fails = 0
			n.first = now
			if n.again {
				n.first = n.againAt
			}
			n.again = false
			e.arm(id, n, now)
		default:
			delete(a.npcs, id)
		}
	}()
}

// ResumeAutoTicks arms the auto-tick of every NPC that has it enabled and
// input pending, as if that input had just arrived: a daemon calls it at
// start so nothing posted before a restart waits for more input. It returns
// how many NPCs it armed.
func (e *Engine) ResumeAutoTicks(ctx context.Context) (int, error) {
	ids, err := e.deps.Characters.PendingIn(ctx, character.PendingQuery{AutoTick: true})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		c, err := e.deps.Characters.Get(ctx, id)
		if errors.Is(err, character.ErrNotFound) {
			continue
		}
		if err != nil {
			return n, err
		}
		e.autoNote(c)
		n++
	}
	return n, nil
}

// stopAutoTicks stops every auto-tick timer and refuses new ones; ticks
// already running go on (Close waits for them).
func (e *Engine) stopAutoTicks() {
	a := e.auto
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for id, n := range a.npcs {
		if n.timer != nil {
			n.timer.Stop()
		}
		if !n.running {
			delete(a.npcs, id)
		}
	}
}
