package scenarios

import (
	"context"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/npcd/npcd/sleep"
)

// Schedule is what the game clock reads of the sleep schedule
// (sleep.Scheduler).
type Schedule interface {
	// Len is how many jobs are scheduled.
	Len() int
	// NextRun is when npc's sleep runs next.
	NextRun(npc string) (time.Time, bool)
}

// GameClock is a scenario's game clock: a fake clock read by the engine
// and the sleep scheduler, moved only by the scenario. Once it follows a
// running schedule, moving it past the NPC's sleep time runs the scheduled
// sleep, and Advance waits for it, so the scenario sees its effects as a
// game server would the next morning.
type GameClock struct {
	fake  *clockwork.FakeClock
	sched Schedule
	npc   string
	slept chan sleepDone
	// wait bounds, in real time, how long a due sleep may take to run
	// before the scenario is stopped rather than left hanging.
	wait time.Duration
}

type sleepDone struct {
	rep *sleep.Report
	err error
}

// NewGameClock returns the game clock of a scenario whose NPC is npc,
// frozen at start.
func NewGameClock(start time.Time, npc string) *GameClock {
	return &GameClock{fake: clockwork.NewFakeClockAt(start), npc: npc, slept: make(chan sleepDone, 64), wait: 5 * time.Minute}
}

// Clock is the clock to wire the engine and the sleep scheduler with.
func (g *GameClock) Clock() clockwork.Clock { return g.fake }

// Follow makes Advance run the sleeps sched sets off on the way; sched must
// be started, and its sleeps reported to Slept.
func (g *GameClock) Follow(sched Schedule) { g.sched = sched }

// Slept is the hook told about every scheduled sleep once it ends; it
// never blocks the scheduler.
func (g *GameClock) Slept(id string, rep *sleep.Report, err error) {
	select {
	case g.slept <- sleepDone{rep: rep, err: err}:
	default:
	}
}

func (g *GameClock) Now() time.Time { return g.fake.Now() }

func (g *GameClock) Advance(ctx context.Context, d time.Duration) ([]*sleep.Report, error) {
	target := g.fake.Now().Add(d)
	var reps []*sleep.Report
	for {
		now := g.fake.Now()
		if g.sched == nil {
			g.fake.Advance(target.Sub(now))
			return reps, nil
		}
		// The scheduler arms its timers on its own goroutine: moving the
		// clock before they are set would skip a night.
		wctx, cancel := context.WithTimeout(ctx, g.wait)
		err := g.fake.BlockUntilContext(wctx, g.sched.Len())
		cancel()
		if err != nil {
			return reps, fmt.Errorf("the sleep schedule did not set its timers: %w", err)
		}
		next, ok := g.sched.NextRun(g.npc)
		if !ok || next.After(target) || !next.After(now) {
			if target.After(now) {
				g.fake.Advance(target.Sub(now))
			}
			return reps, nil
		}
		// A moment past the run, as a real clock is when a timer fires:
		// frozen exactly on it, the scheduler may take the run it is in for
		// the next one.
		g.fake.Advance(next.Sub(now) + time.Second)
		select {
		case s := <-g.slept:
			if s.err != nil {
				return reps, fmt.Errorf("the sleep scheduled at %s: %w", next.UTC().Format(time.RFC3339), s.err)
			}
			reps = append(reps, s.rep)
		case <-ctx.Done():
			return reps, ctx.Err()
		case <-time.After(g.wait):
			return reps, fmt.Errorf("the sleep scheduled at %s did not run", next.UTC().Format(time.RFC3339))
		}
	}
}
