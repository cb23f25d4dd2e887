package eval

import (
	"context"
	"maps"
	"slices"

	"gorm.io/gorm"

	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/tick"
)

// WithSleep returns opts with what the daemon adds to a replay: with
// compaction, the compactor and the consolidator (and their schema); with
// sleepBetween, a sleep after each session.
func WithSleep(opts Options, compaction, sleepBetween bool) Options {
	opts.Migrations = sleep.Migrations()
	if compaction {
		opts.Configure = func(ctx context.Context, db *gorm.DB, deps *tick.Deps) error {
			comp, err := sleep.NewCompactor(sleep.CompactorDeps{DB: db, Characters: deps.Characters, Journal: deps.Journal,
				Builtin: deps.Builtin}, sleep.CompactorConfig{})
			if err != nil {
				return err
			}
			deps.Compactor = comp
			similar, _ := deps.Retriever.(*journal.Retriever)
			cons, err := sleep.NewConsolidator(sleep.ConsolidatorDeps{DB: db, Characters: deps.Characters, Journal: deps.Journal,
				Similar: similar, Builtin: deps.Builtin}, sleep.ConsolidatorConfig{})
			if err != nil {
				return err
			}
			if deps.Locks == nil {
				deps.Locks = tick.NewLocks()
			}
			deps.Sleeper, err = sleep.NewRunner(sleep.RunnerDeps{DB: db, Characters: deps.Characters, Journal: deps.Journal,
				Lock: deps.Locks, Compactor: comp, Consolidator: cons})
			return err
		}
	}
	if sleepBetween {
		opts.AfterSession = func(ctx context.Context, eng *tick.Engine, npc string, _ int) error {
			_, err := eng.Sleep(ctx, npc)
			return err
		}
	}
	return opts
}

// AblateAll runs the benchmark once with every signal of the memory search
// and once with each signal of Ablations off, in name order.
func AblateAll(ctx context.Context, opts Options) (full *Report, ablated []*Report, err error) {
	opts.Ablate = ""
	if full, err = LoCoMo(ctx, opts); err != nil {
		return nil, nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(Ablations)) {
		opts.Ablate = name
		rep, err := LoCoMo(ctx, opts)
		if err != nil {
			return nil, nil, err
		}
		ablated = append(ablated, rep)
	}
	return full, ablated, nil
}
