package tick

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/sleep"
)

// Consolidator turns an NPC's unconsolidated journal entries into long-term
// memories and profile facts. It must be safe to re-run after a crash: each
// batch of entries is marked consolidated in the transaction that stores
// what was made of it.
type Consolidator interface {
	Consolidate(ctx context.Context, c *character.Character) (sleep.Consolidation, error)
}

// Sleep runs one sleep of NPC id: it consolidates the journal, then, when the
// context is over the NPC's sleep threshold, compacts it. The summary is
// written outside the NPC's lock, so ticks go on during a slow summary; only
// the rows planned beforehand are archived. A sleep with nothing new since
// the last one is skipped at the cost of two queries. Sleeps of one NPC never
// overlap.
func (e *Engine) Sleep(ctx context.Context, id string) (*sleep.Report, error) {
	if err := e.begin(); err != nil {
		return nil, err
	}
	defer e.inflight.Done()
	unlock, err := e.sleeps.lock(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("%w: waiting for the sleep of %q: %v", ErrBusy, id, err)
	}
	defer unlock()
	// The lease is held for the whole sleep, so no other daemon ticks or
	// sleeps the NPC meanwhile; this process's ticks go on.
	release, err := e.lease(ctx, id)
	if err != nil {
		return nil, err
	}
	defer release()
	start := e.deps.Clock.Now()
	rep, err := e.sleep(ctx, id)
	if err != nil {
		return nil, err
	}
	rep.DurationMS = e.deps.Clock.Since(start).Milliseconds()
	if rep.Compaction != nil && e.deps.Observer != nil {
		e.deps.Observer.CompactionDone(rep.Compaction.Trigger)
	}
	return rep, nil
}

func (e *Engine) sleep(ctx context.Context, id string) (*sleep.Report, error) {
	cs := e.deps.Characters
	c, err := cs.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	latest, err := cs.LatestMessageID(ctx, id)
	if err != nil {
		return nil, err
	}
	pending, err := e.deps.Journal.CountUnconsolidated(ctx, id)
	if err != nil {
		return nil, err
	}
	rep := &sleep.Report{}
	if latest == c.State.SleepMark && pending == 0 && c.Utilization() < c.Compaction.SleepThreshold {
		rep.Skipped = true
		rep.Note = "nothing changed since the last sleep"
		return rep, nil
	}
	if e.deps.Consolidator != nil && pending > 0 {
		cons, err := e.deps.Consolidator.Consolidate(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("consolidate %q: %w", id, err)
		}
		rep.Consolidated, rep.MemoriesAdded, rep.MemoriesSuperseded, rep.MemoriesSkipped = cons.Entries, cons.Added, cons.Superseded, cons.Skipped
		rep.ProfilesUpdated, rep.Reflections, rep.Extractor = cons.ProfilesUpdated, cons.Reflections, cons.Extractor
	}
	if e.deps.Compactor != nil {
		rec, note, err := e.sleepCompaction(ctx, id)
		if err != nil {
			return nil, err
		}
		rep.Compaction, rep.Note = rec, note
	}
	err = e.withNPC(ctx, id, func(ctx context.Context) error {
		return e.deps.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			cs := cs.WithTx(tx)
			if err := cs.Still(ctx, c); err != nil {
				return err
			}
			return cs.UpdateState(ctx, id, map[string]any{"sleep_mark": latest, "last_sleep_at": e.deps.Clock.Now().UTC()})
		})
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// SleepCompactor is what a sleep needs to compact in three steps, so that the
// slow middle one runs without the NPC's lock. *sleep.Compactor implements it.
type SleepCompactor interface {
	Plan(ctx context.Context, c *character.Character, trigger, instruction string) (*sleep.Plan, error)
	Pinned(ctx context.Context, p *sleep.Plan) ([]string, error)
	Summarize(ctx context.Context, c *character.Character, p *sleep.Plan, pinned []string) sleep.Summary
	Commit(ctx context.Context, c *character.Character, p *sleep.Plan, s sleep.Summary) (*sleep.Record, error)
}

// sleepCompaction compacts NPC id if it is over its sleep threshold: plan
// under the lock, summarize outside it, commit under it. A plan overtaken by
// an emergency compaction or a clear meanwhile is dropped, not forced.
func (e *Engine) sleepCompaction(ctx context.Context, id string) (*sleep.Record, string, error) {
	sc, ok := e.deps.Compactor.(SleepCompactor)
	if !ok {
		return nil, "", nil
	}
	var (
		c    *character.Character
		plan *sleep.Plan
	)
	err := e.withNPC(ctx, id, func(ctx context.Context) error {
		var err error
		if c, err = e.deps.Characters.Get(ctx, id); err != nil {
			return err
		}
		if c.Utilization() < c.Compaction.SleepThreshold {
			return nil
		}
		plan, err = sc.Plan(ctx, c, sleep.TriggerSleep, "")
		return err
	})
	if err != nil || plan.Empty() {
		return nil, "", err
	}
	pinned, err := sc.Pinned(ctx, plan)
	if err != nil {
		return nil, "", err
	}
	sum := sc.Summarize(ctx, c, plan, pinned)
	var rec *sleep.Record
	err = e.withNPC(ctx, id, func(ctx context.Context) error {
		fresh, err := e.deps.Characters.Get(ctx, id)
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
	if errors.Is(err, sleep.ErrStale) {
		return nil, "the planned compaction was overtaken by another one; nothing was archived", nil
	}
	return rec, "", err
}
