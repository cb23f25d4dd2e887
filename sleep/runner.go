package sleep

import (
	"context"
	"errors"
	"fmt"

	"github.com/jonboulle/clockwork"
	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/keylock"
	"github.com/npcd/npcd/journal"
)

// ErrBusy is a sleep that gave up waiting for another sleep of the same NPC.
var ErrBusy = errors.New("sleep: busy")

// Locker is the per-NPC lock a sleep shares with ticks: work holding an
// NPC's lock never interleaves with other work holding it. The tick engine's
// in-memory locks implement it; a lease in the database may. Lock waits for
// npc's lock or for ctx to end, and returns the function that releases it.
type Locker interface {
	Lock(ctx context.Context, npc string) (unlock func(), err error)
}

// Compacting is what a sleep needs of the compactor: the cut planned under
// the NPC's lock, the summary written outside it (ticks go on), and the
// commit under it. *Compactor implements it.
type Compacting interface {
	Plan(ctx context.Context, c *character.Character, trigger, instruction string) (*Plan, error)
	Pinned(ctx context.Context, p *Plan) ([]string, error)
	Summarize(ctx context.Context, c *character.Character, p *Plan, pinned []string) Summary
	Commit(ctx context.Context, c *character.Character, p *Plan, s Summary) (*Record, error)
	// CommitSleep is Commit for a sleep, setting the sleep mark in the
	// compaction's transaction.
	CommitSleep(ctx context.Context, c *character.Character, p *Plan, s Summary, mark SleepMark) (*Record, error)
}

// Consolidating turns an NPC's unconsolidated journal entries into
// long-term memories and profile facts. It must be safe to re-run after a
// crash: each batch of entries is marked consolidated in the transaction
// that stores what was made of it. *Consolidator implements it.
type Consolidating interface {
	Consolidate(ctx context.Context, c *character.Character) (Consolidation, error)
}

// Observer counts the compactions sleeps make, for metrics; it must be
// quick and safe for concurrent use.
type Observer interface {
	CompactionDone(trigger string)
}

// RunnerDeps are a Runner's collaborators. DB, Characters, Journal and Lock
// are required.
type RunnerDeps struct {
	DB         *gorm.DB
	Characters *character.Store
	Journal    *journal.Store
	// Lock is the NPC's lock, shared with ticks.
	Lock Locker
	// Compactor compacts a context past the sleep threshold; nil: never.
	Compactor Compacting
	// Consolidator consolidates the journal; nil: never.
	Consolidator Consolidating
	Clock        clockwork.Clock // default: the real clock
	Observer     Observer        // optional
}

// Runner runs sleeps: it is the Sleeper of the schedule and of the engine's
// Sleep. Sleeps of one NPC never overlap.
type Runner struct {
	deps RunnerDeps
	one  *keylock.Map // one sleep per NPC at a time, apart from ticks
}

// NewRunner builds a Runner.
func NewRunner(deps RunnerDeps) (*Runner, error) {
	if deps.DB == nil || deps.Characters == nil || deps.Journal == nil || deps.Lock == nil {
		return nil, errors.New("sleep: a runner needs DB, Characters, Journal and Lock")
	}
	if deps.Clock == nil {
		deps.Clock = clockwork.NewRealClock()
	}
	return &Runner{deps: deps, one: keylock.New()}, nil
}

// Sleep runs one sleep of NPC id:
//
//  1. skipped, at the cost of two queries, when nothing was written since
//     the last sleep;
//  2. the journal is consolidated into memories and profile facts;
//  3. when the context is over the NPC's sleep threshold, it is compacted:
//     the cut planned under the NPC's lock, the summary written outside it,
//     only the planned rows archived when it commits;
//  4. the sleep mark is set, under the lock, if the NPC is still the same
//     life.
func (r *Runner) Sleep(ctx context.Context, id string) (*Report, error) {
	unlock, err := r.one.Lock(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("%w: waiting for the sleep of %q: %v", ErrBusy, id, err)
	}
	defer unlock()
	start := r.deps.Clock.Now()
	rep, err := r.sleep(ctx, id)
	if err != nil {
		return nil, err
	}
	rep.DurationMS = r.deps.Clock.Since(start).Milliseconds()
	if rep.Compaction != nil && r.deps.Observer != nil {
		r.deps.Observer.CompactionDone(rep.Compaction.Trigger)
	}
	return rep, nil
}

// withNPC runs fn holding NPC id's lock.
func (r *Runner) withNPC(ctx context.Context, id string, fn func(ctx context.Context) error) error {
	unlock, err := r.deps.Lock.Lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	return fn(ctx)
}

func (r *Runner) sleep(ctx context.Context, id string) (*Report, error) {
	cs := r.deps.Characters
	c, err := cs.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	latest, err := cs.LatestMessageID(ctx, id)
	if err != nil {
		return nil, err
	}
	pending, err := r.deps.Journal.CountUnconsolidated(ctx, id)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	if latest == c.State.SleepMark && pending == 0 && c.Utilization() < c.Compaction.SleepThreshold {
		rep.Skipped = true
		rep.Note = "nothing changed since the last sleep"
		return rep, nil
	}
	if r.deps.Consolidator != nil && pending > 0 {
		cons, err := r.deps.Consolidator.Consolidate(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("consolidate %q: %w", id, err)
		}
		rep.Consolidated, rep.MemoriesAdded, rep.MemoriesSuperseded, rep.MemoriesSkipped = cons.Entries, cons.Added, cons.Superseded, cons.Skipped
		rep.ProfilesUpdated, rep.Reflections, rep.Extractor = cons.ProfilesUpdated, cons.Reflections, cons.Extractor
	}
	if r.deps.Compactor != nil {
		rec, note, marked, err := r.compact(ctx, c, latest)
		if err != nil {
			return nil, err
		}
		rep.Compaction, rep.Note = rec, note
		if marked {
			return rep, nil // the compaction set the sleep mark
		}
	}
	err = r.withNPC(ctx, id, func(ctx context.Context) error {
		return r.deps.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			cs := cs.WithTx(tx)
			if err := cs.Still(ctx, c); err != nil {
				return err
			}
			mark, err := markPast(ctx, cs, id, latest, rep.summaryID())
			if err != nil {
				return err
			}
			return cs.UpdateState(ctx, id, map[string]any{"sleep_mark": mark, "last_sleep_at": r.deps.Clock.Now().UTC()})
		})
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// markPast is the sleep mark of a sleep that looked at the messages up to
// latest and wrote the summary sum (0 for none). The summary is no news for
// the next sleep: unless a message came after latest meanwhile, the mark
// passes it, so that a sleep with nothing new since is skipped.
func markPast(ctx context.Context, cs *character.Store, id string, latest, sum int64) (int64, error) {
	if sum <= latest {
		return latest, nil
	}
	newer, err := cs.HasMessagesAfter(ctx, id, latest, sum)
	if err != nil || newer {
		return latest, err
	}
	return sum, nil
}

// compact compacts the NPC slept (slept, as the sleep first read it) if it
// is over its sleep threshold: plan under the lock, summarize outside it,
// commit under it. A plan overtaken by an emergency compaction or a clear
// meanwhile is dropped, not forced. When the compactor can, the commit
// also sets the sleep mark, from latest (marked is then true).
func (r *Runner) compact(ctx context.Context, slept *character.Character, latest int64) (rec *Record, note string, marked bool, err error) {
	sc := r.deps.Compactor
	id := slept.ID
	var (
		c    *character.Character
		plan *Plan
	)
	err = r.withNPC(ctx, id, func(ctx context.Context) error {
		// Under the lock only the state is read, unless the settings
		// changed since the sleep read the NPC.
		var err error
		if c, err = r.deps.Characters.Fresh(ctx, slept); err != nil {
			return err
		}
		if c.Utilization() < c.Compaction.SleepThreshold {
			return nil
		}
		plan, err = sc.Plan(ctx, c, TriggerSleep, "")
		return err
	})
	if err != nil || plan.Empty() {
		return nil, "", false, err
	}
	pinned, err := sc.Pinned(ctx, plan)
	if err != nil {
		return nil, "", false, err
	}
	sum := sc.Summarize(ctx, c, plan, pinned)
	// The mark is the sleep's: set with the compaction only when the life
	// planned is the one the sleep read; else the mark is left to the
	// last step, which finds the NPC gone.
	err = r.withNPC(ctx, id, func(ctx context.Context) error {
		if c.CreatedAt.Equal(slept.CreatedAt) {
			// The commit reads the NPC in its transaction and checks it
			// is still the life planned.
			var err error
			rec, err = sc.CommitSleep(ctx, c, plan, sum, SleepMark{Latest: latest, At: r.deps.Clock.Now().UTC()})
			marked = err == nil
			return err
		}
		fresh, err := r.deps.Characters.Get(ctx, id)
		if err != nil {
			return err
		}
		if !fresh.CreatedAt.Equal(c.CreatedAt) {
			// Deleted and created again while the summary was written: the
			// plan is of a life that is gone.
			return fmt.Errorf("%w: npc %q was deleted and created again", character.ErrNotFound, id)
		}
		rec, err = sc.Commit(ctx, fresh, plan, sum)
		return err
	})
	if errors.Is(err, ErrStale) {
		return nil, "the planned compaction was overtaken by another one; nothing was archived", false, nil
	}
	return rec, "", marked, err
}
