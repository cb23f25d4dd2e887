package tick

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tools"
)

// Owner is a store that keeps rows of an NPC outside package character; it
// deletes them in the transaction that deletes the NPC.
type Owner interface {
	DeleteNPC(ctx context.Context, tx *gorm.DB, id string) error
}

// Forgetter is an Owner that also caches rows of an NPC in memory. The
// engine calls Forget once a delete has committed, since a reader that ran
// during the delete may have cached rows the delete removed.
type Forgetter interface {
	Forget(id string)
}

// Scheduler keeps each NPC's sleep schedule in step with its settings.
type Scheduler interface {
	// Check validates an NPC's schedule settings without changing anything;
	// it returns a *character.FieldError for a bad cron or time zone.
	Check(c *character.Character) error
	// Schedule adds or updates the NPC's sleep job.
	Schedule(c *character.Character) error
	// Unschedule removes the NPC's sleep job.
	Unschedule(id string)
}

// PutNPC creates an NPC or replaces its settings, keeping its memory. It
// applies defaults (the engine's default model first), validates the
// settings and tool schemas, and measures the fixed system text and tool
// definitions once. It reports whether the NPC was created.
func (e *Engine) PutNPC(ctx context.Context, c *character.Character) (created bool, err error) {
	return e.putNPC(ctx, c, false)
}

// CreateNPC creates an NPC only if none has its id; otherwise it fails with
// character.ErrExists and leaves the existing NPC as it is. A game that
// registers its NPCs at every start uses it so edits made since survive.
func (e *Engine) CreateNPC(ctx context.Context, c *character.Character) error {
	_, err := e.putNPC(ctx, c, true)
	return err
}

// CheckNPC is the one validation of an NPC's settings, shared by PutNPC and
// the scenario loader: the settings' own rules (a *character.FieldError),
// the game tools' definitions beside the internal ones (a
// *tools.SchemaError names the tool's field), and the fit of the fixed
// prompt under the compaction target (a *character.UnfitError). c must have
// its defaults applied. It returns the compiled tools and the fit.
func CheckNPC(c *character.Character, internal []tools.Tool, counter *llm.Counter) (*tools.Set, Fit, error) {
	if err := c.Validate(); err != nil {
		return nil, Fit{}, err
	}
	set, err := tools.Compile(c.Tools.V, internal)
	if err != nil {
		return nil, Fit{}, err
	}
	fit, err := CheckFit(c, set, counter)
	if err != nil {
		return nil, Fit{}, err
	}
	return set, fit, nil
}

func (e *Engine) putNPC(ctx context.Context, c *character.Character, createOnly bool) (created bool, err error) {
	if c.Model == "" {
		c.Model = e.cfg.DefaultModel
	}
	c.ApplyDefaults()
	set, fit, err := CheckNPC(c, e.deps.Internals.Tools(), e.Counter(c.Model))
	if err != nil {
		return false, err
	}
	if c.Model != llm.BuiltinModel && e.deps.Remote == nil {
		// Ticks would quietly fall back to the builtin model: refuse, as
		// the daemon refuses a default model it cannot reach.
		return false, &ValueError{Field: "model", Message: fmt.Sprintf(
			"%q needs a model endpoint and npcd has none configured (NPCD_LLM_BASE_URL); without one only %q runs", c.Model, llm.BuiltinModel)}
	}
	if e.deps.Scheduler != nil {
		if err := e.deps.Scheduler.Check(c); err != nil {
			return false, err
		}
	}
	c.State.SystemTokens, c.State.ToolTokens = fit.SystemTokens, fit.ToolTokens
	err = e.withNPC(ctx, c.ID, func(ctx context.Context) error {
		if createOnly {
			created = true
			return e.deps.Characters.Create(ctx, c)
		}
		created, err = e.deps.Characters.Put(ctx, c)
		return err
	})
	e.settings.Delete(c.ID)
	if err != nil {
		e.toolsets.Delete(c.ID)
		return false, err
	}
	// The tools just checked are the NPC's first tick's: c carries the
	// update time the store wrote, which keys them.
	e.keepToolSet(c, set)
	if e.deps.Scheduler != nil {
		if err := e.deps.Scheduler.Schedule(c); err != nil {
			return created, fmt.Errorf("schedule sleep of %q: %w", c.ID, err)
		}
	}
	return created, nil
}

// DeleteNPC removes an NPC and everything stored about it, in one
// transaction under the NPC's lock. Writers that work without the lock
// (event posts, a sleep's consolidation and summary) check inside their own
// transactions that the NPC they started with still exists (character.Store.Still),
// so nothing lands after the delete and an NPC created again under the same
// id starts empty.
func (e *Engine) DeleteNPC(ctx context.Context, id string) error {
	err := e.withNPC(ctx, id, func(ctx context.Context) error {
		// On PostgreSQL a writer outside the NPC's lock (a consolidation)
		// can deadlock with the delete; the victim is rolled back whole and
		// the delete runs again.
		return store.Transaction(ctx, e.deps.DB, func(tx *gorm.DB) error {
			if err := e.deps.Characters.WithTx(tx).Delete(ctx, id); err != nil {
				return err
			}
			for _, o := range e.deps.Owners {
				if err := o.DeleteNPC(ctx, tx, id); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, o := range e.deps.Owners {
		if f, ok := o.(Forgetter); ok {
			f.Forget(id)
		}
	}
	e.toolsets.Delete(id)
	e.settings.Delete(id)
	e.history.drop(id)
	e.forgetPosted(id)
	e.eventsPosted.Delete(id)
	if e.deps.Scheduler != nil {
		e.deps.Scheduler.Unschedule(id)
	}
	return nil
}

// Compact runs a manual compaction of NPC id now, whatever its utilization,
// honouring an optional instruction. It returns nil when there is nothing to
// compact.
func (e *Engine) Compact(ctx context.Context, id, instruction string) (*sleep.Record, error) {
	if e.deps.Compactor == nil {
		return nil, errors.New("tick: compaction is not configured")
	}
	if len(instruction) > 1000 {
		return nil, &InputError{Field: "instruction", Message: "is longer than 1000 bytes"}
	}
	var rec *sleep.Record
	err := e.withNPC(ctx, id, func(ctx context.Context) error {
		c, err := e.deps.Characters.Get(ctx, id)
		if err != nil {
			return err
		}
		var after *character.Character
		rec, after, err = e.deps.Compactor.Compact(ctx, c, sleep.TriggerManual, instruction)
		e.landed(rec, after, err)
		return err
	})
	return rec, err
}

// ClearContext archives every live message of NPC id (nothing is deleted)
// and drops pending tool calls, so the next tick starts from a fresh context
// with its memories intact.
func (e *Engine) ClearContext(ctx context.Context, id string) error {
	return e.withNPC(ctx, id, func(ctx context.Context) error {
		return e.deps.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			cs := e.deps.Characters.WithTx(tx)
			if _, err := cs.Get(ctx, id); err != nil {
				return err
			}
			live, err := cs.LiveMessages(ctx, id)
			if err != nil {
				return err
			}
			ids := make([]int64, len(live))
			for i, m := range live {
				ids[i] = m.ID
			}
			if err := cs.Archive(ctx, id, ids, nil); err != nil {
				return err
			}
			e.history.drop(id)
			return cs.UpdateState(ctx, id, map[string]any{"awaiting": store.NewJSON([]character.PendingCall{}), "resume": false})
		})
	})
}
