package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"gorm.io/gorm"

	"github.com/npcd/npcd/api"
	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/inspect"
	"github.com/npcd/npcd/internal/schema"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/lease"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tick"
	"github.com/npcd/npcd/tools"
)

// app is npcd wired together: the only place concrete types meet.
type app struct {
	cfg       Config
	log       zerolog.Logger
	db        *gorm.DB
	chars     *character.Store
	journal   *journal.Store
	compactor *sleep.Compactor
	scheduler *sleep.Scheduler
	engine    *tick.Engine
	// leases gives each NPC one daemon at a time among those sharing the
	// database; nil for read-only commands.
	leases *lease.Manager
	// retriever is the memory search the engine and memory_search use;
	// scenarios check what an NPC recalls through it.
	retriever *journal.Retriever
	metrics   *api.Metrics
	server    *api.Server
	readOnly  bool
	clock     clockwork.Clock
	// upkeep runs the daemon's housekeeping on a schedule (pruning tick
	// outcomes); nil until startUpkeep. stopUpkeep ends its work.
	upkeep     gocron.Scheduler
	stopUpkeep context.CancelFunc
}

// appOptions adjust the wiring for commands other than serve.
type appOptions struct {
	clock clockwork.Clock
	// tickConfig overrides engine settings (benchmarks, scenarios).
	tickConfig func(*tick.Config)
	// remote replaces the configured endpoint (scenarios' scripted model).
	remote llm.Chatter
	// slept, when set, is told about every scheduled sleep once it ends
	// (scenarios wait for the sleeps their game clock sets off).
	slept func(id string, rep *sleep.Report, err error)
	// readOnly opens the database read-only and leaves its schema as it is
	// (aihistory --db, safe while a daemon writes the file).
	readOnly bool
}

// openApp opens the database, applies the schema and wires every piece. The
// caller closes it with close.
func openApp(ctx context.Context, cfg Config, log zerolog.Logger, opt appOptions) (*app, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	db, err := store.Open(ctx, cfg.DB, store.Options{Driver: cfg.DBDriver, ReadOnly: opt.readOnly})
	if err != nil {
		return nil, err
	}
	a := &app{cfg: cfg, log: log, db: db, readOnly: opt.readOnly}
	if err := a.wire(ctx, opt); err != nil {
		store.Close(db)
		return nil, err
	}
	return a, nil
}

func (a *app) wire(ctx context.Context, opt appOptions) error {
	cfg := a.cfg
	if opt.readOnly {
		if err := schema.Current(ctx, a.db); err != nil {
			return err
		}
	} else if err := store.Migrate(ctx, a.db, schema.Migrations()); err != nil {
		return err
	}
	a.chars = character.NewStore(a.db)
	a.journal = journal.NewStore(a.db)
	builtin := llm.NewBuiltin()
	var remote llm.Chatter
	retrieverOpts := []journal.Option{journal.WithLogger(a.log), journal.WithCacheBytes(int64(cfg.IndexCacheMB) << 20)}
	if cfg.LLMBaseURL != "" {
		client, err := llm.NewClient(llm.ClientConfig{BaseURL: cfg.LLMBaseURL, APIKey: cfg.LLMAPIKey, Model: cfg.Model,
			EmbeddingModel: cfg.EmbeddingModel, Timeout: cfg.LLMTimeout})
		if err != nil {
			return fmt.Errorf("llm endpoint: %w", err)
		}
		remote = client
		if cfg.EmbeddingModel != "" {
			retrieverOpts = append(retrieverOpts, journal.WithEmbedder(client, cfg.EmbeddingModel))
		}
	}
	ret, err := journal.NewRetriever(a.journal, retrieverOpts...)
	if err != nil {
		return err
	}
	a.retriever = ret
	if opt.remote != nil {
		remote = opt.remote
	}
	clock := opt.clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	a.clock = clock
	a.metrics = api.NewMetrics()
	a.metrics.WatchStore(
		func(ctx context.Context) (float64, error) {
			n, err := a.chars.PendingTotal(ctx)
			return float64(n), err
		},
		func(ctx context.Context) (float64, error) { n, err := store.Size(ctx, a.db); return float64(n), err })
	// The engine reports its own model calls; summaries and consolidation
	// are counted on the way.
	sleepRemote, sleepBuiltin := observed(remote, cfg.Model, a.metrics), observed(builtin, llm.BuiltinModel, a.metrics)
	comp, err := sleep.NewCompactor(sleep.CompactorDeps{DB: a.db, Characters: a.chars, Journal: a.journal, Remote: sleepRemote,
		Builtin: sleepBuiltin, Clock: clock, Log: a.log}, sleep.CompactorConfig{SummaryTimeout: cfg.LLMTimeout})
	if err != nil {
		return err
	}
	a.compactor = comp
	cons, err := sleep.NewConsolidator(sleep.ConsolidatorDeps{DB: a.db, Characters: a.chars, Journal: a.journal, Similar: ret, Remote: sleepRemote,
		Builtin: sleepBuiltin, Clock: clock, Log: a.log}, sleep.ConsolidatorConfig{Timeout: cfg.LLMTimeout})
	if err != nil {
		return err
	}
	a.metrics.WatchIndexCache(ret.CacheStats)
	if store.IsSQLite(a.db) {
		a.metrics.WatchWAL(func() int64 { return walSize(cfg.DB) })
		a.metrics.WatchWriters(func() store.WriterStats {
			st, _ := store.Writers(a.db)
			return st
		})
	}
	// One set of per-NPC locks: ticks take them, and so do sleeps, whether
	// the schedule or the API starts them.
	locks := tick.NewLocks()
	sleeps, err := sleep.NewRunner(sleep.RunnerDeps{DB: a.db, Characters: a.chars, Journal: a.journal, Lock: locks,
		Compactor: comp, Consolidator: cons, Clock: clock, Observer: a.metrics})
	if err != nil {
		return err
	}
	scfg := sleep.ScheduleConfig{DefaultCron: cfg.SleepCron, DefaultTimezone: cfg.SleepTimezone, Clock: clock, Log: a.log,
		Done: func(id string, took time.Duration, rep *sleep.Report, err error) {
			a.metrics.SleepDone(took, rep, err)
			if opt.slept != nil {
				opt.slept(id, rep, err)
			}
		}}
	if !opt.readOnly {
		// Leases and sleep slots live in the database, so daemons sharing
		// it split the NPCs and sleep each one once per slot. Leases keep
		// the real clock: they measure this process's time, not the game's.
		a.leases, err = lease.New(a.db, lease.Config{TTL: cfg.LeaseTTL, Wait: cfg.LeaseWait, Log: a.log,
			Lost: func(id string) { a.engine.Forget(id) }})
		if err != nil {
			return err
		}
		// A daemon takes a sleep's slot only once it holds the NPC, and
		// keeps the NPC until the sleep ends.
		scfg.Locker = sleep.NewSlotLocker(a.db, a.leases.Holder(), clock, func(ctx context.Context, id string) (func(), error) {
			return a.engine.HoldNPC(lease.NoWait(ctx), id)
		})
	}
	a.scheduler, err = sleep.NewScheduler(scfg, sleeps)
	if err != nil {
		return err
	}
	tcfg := tick.Config{DefaultModel: cfg.Model, MaxConcurrentCalls: cfg.MaxConcurrentCalls, TickTimeout: cfg.TickTimeout,
		BackgroundCompaction: cfg.BackgroundCompaction, HistoryCacheBytes: int64(cfg.HistoryCacheMB) << 20,
		ProfileCacheBytes:     int64(cfg.ProfileCacheMB) << 20,
		BackgroundCompactions: cfg.BackgroundCompactions}
	if tcfg.BackgroundCompactions == 0 && cfg.LLMBaseURL != "" {
		// Summaries of an endpoint wait on the network, not on a core.
		tcfg.BackgroundCompactions = cfg.MaxConcurrentCalls
	}
	if opt.tickConfig != nil {
		opt.tickConfig(&tcfg)
	}
	tdeps := tick.Deps{
		DB: a.db, Characters: a.chars, Journal: a.journal,
		Internals: tools.NewInternals(a.retriever, a.chars), Retriever: a.retriever,
		Remote: remote, Builtin: builtin, Compactor: comp, Clock: clock, Log: a.log,
		Observer: a.metrics, Owners: []tick.Owner{a.journal, ret, comp}, Scheduler: a.scheduler, Locks: locks, Sleeper: sleeps,
	}
	if a.leases != nil {
		tdeps.Leases = a.leases
	}
	a.engine, err = tick.New(tdeps, tcfg)
	if err != nil {
		return err
	}
	a.metrics.WatchHistoryCache(a.engine.HistoryCacheStats)
	if a.leases != nil {
		a.leases.Start()
	}
	deps := api.Deps{Engine: a.engine, NPCs: a.chars, Journal: a.journal, Compactions: comp, Metrics: a.metrics,
		Retriever: a.retriever, Inspector: inspect.New(a.db)}
	if !opt.readOnly { // a server over a file has no schedule to tell
		deps.Sleeps = a.scheduler
	}
	a.server, err = api.New(api.Config{Token: cfg.APIToken, MaxBodyBytes: cfg.MaxBodyBytes, Log: a.log}, deps)
	return err
}

// observed counts the model calls of ch (summaries, consolidation) in m,
// under model unless a request names its own; nil stays nil.
func observed(ch llm.Chatter, model string, m *api.Metrics) llm.Chatter {
	if ch == nil {
		return nil
	}
	return observedChatter{ch: ch, model: model, m: m}
}

type observedChatter struct {
	ch    llm.Chatter
	model string
	m     *api.Metrics
}

func (o observedChatter) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	start := time.Now()
	resp, err := o.ch.Chat(ctx, req)
	o.m.ModelCallFor(req.Task, cmp.Or(req.Model, o.model), time.Since(start), resp.Usage, err)
	return resp, err
}

// startSchedules schedules every stored NPC's sleep and starts the scheduler.
func (a *app) startSchedules(ctx context.Context) error {
	cs, err := a.chars.List(ctx)
	if err != nil {
		return err
	}
	if err := a.scheduler.Restore(cs); err != nil {
		return err
	}
	a.scheduler.Start()
	return nil
}

// warmIndexes builds the search indexes of the stored NPCs in the
// background, those that perceived latest (game time) first, until the
// index cache holds journal.WarmShare of NPCD_INDEX_CACHE_MB: the first
// tick of a long-lived NPC after a start then need not read its whole
// past. A tick that comes first builds its NPC's index itself, as without
// it; a tick of an NPC whose index is being built waits for it. With
// PostgreSQL, where several daemons may share the NPCs, a daemon cannot
// know which it will be sent, and nothing is warmed.
func (a *app) warmIndexes(ctx context.Context) {
	if a.readOnly || !store.IsSQLite(a.db) {
		return
	}
	start := time.Now()
	cs, err := a.chars.List(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn().Err(err).Msg("warming the search indexes: listing the NPCs failed")
		}
		return
	}
	if len(cs) == 0 {
		return
	}
	slices.SortStableFunc(cs, func(x, y character.Character) int { return y.State.GameTime.Compare(x.State.GameTime) })
	ids := make([]string, len(cs))
	for i := range cs {
		ids[i] = cs[i].ID
	}
	// Each NPC is built under its lease, as its ticks use it: taking a
	// lease this process did not hold drops what is cached of the NPC.
	// An NPC another daemon holds is left to it.
	hold := func(ctx context.Context, id string) (func(), bool) {
		release, err := a.engine.HoldNPC(lease.NoWait(ctx), id)
		return release, err == nil
	}
	n, err := a.retriever.Warm(ctx, ids, hold)
	st := a.retriever.CacheStats()
	ev := a.log.Info()
	if err != nil {
		ev = a.log.Warn().Err(err)
	}
	ev.Int("warmed", n).Int("npcs", len(ids)).Int64("took_ms", time.Since(start).Milliseconds()).
		Int64("cache_bytes", st.Bytes).Int64("cache_limit_bytes", st.Limit).Msg("search indexes warmed")
}

// syncSchedules reloads the sleep schedules from the database every
// interval until ctx ends, so NPCs created, changed or deleted through
// another daemon sharing the database are scheduled here too.
func (a *app) syncSchedules(ctx context.Context, every time.Duration) {
	repeat(ctx, every, func() {
		cs, err := a.chars.List(ctx)
		if err == nil {
			err = a.scheduler.Sync(cs)
		}
		if err != nil && ctx.Err() == nil {
			a.log.Warn().Err(err).Msg("reloading the sleep schedules failed")
		}
	})
}

// repeat calls do every interval until ctx ends.
func repeat(ctx context.Context, every time.Duration, do func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		do()
	}
}

// keepWALSmall checkpoints and truncates SQLite's write-ahead log every
// interval until ctx ends. Automatic checkpoints never shrink the file and
// cannot finish while readers are active, so under steady load it would
// only grow. A checkpoint waits at most a second for readers (writers wait
// meanwhile); one that could not finish is tried again next time.
func (a *app) keepWALSmall(ctx context.Context, every time.Duration) {
	if !store.IsSQLite(a.db) || a.readOnly {
		return
	}
	repeat(ctx, every, func() {
		before := walSize(a.cfg.DB)
		done, err := store.Checkpoint(ctx, a.db, time.Second)
		switch {
		case err != nil && ctx.Err() == nil:
			a.log.Warn().Err(err).Msg("checkpoint of the write-ahead log failed")
		case err == nil && !done:
			a.log.Debug().Int64("wal_bytes", before).Msg("write-ahead log not truncated: readers were active; trying again later")
		case err == nil:
			a.log.Debug().Int64("wal_bytes_before", before).Msg("write-ahead log truncated")
		}
	})
}

// Pruning of tick outcomes past their retention.
const (
	// outcomePruneEvery is how often the daemon prunes.
	outcomePruneEvery = 10 * time.Minute
	// outcomePruneBatch bounds one pruning statement, each its own short
	// transaction, so ticks commit between batches.
	outcomePruneBatch = 1000
)

// pruneOutcomes deletes the tick outcomes older than the retention, in
// batches, and returns how many it deleted. With no retention it does
// nothing.
func (a *app) pruneOutcomes(ctx context.Context) (int, error) {
	if a.cfg.OutcomeRetention <= 0 {
		return 0, nil
	}
	cutoff := a.clock.Now().Add(-a.cfg.OutcomeRetention)
	total := 0
	for {
		n, err := a.chars.PruneOutcomes(ctx, cutoff, outcomePruneBatch)
		total += n
		if err != nil || n < outcomePruneBatch || ctx.Err() != nil {
			return total, err
		}
	}
}

// startUpkeep schedules the daemon's housekeeping with gocron, on the
// app's clock: pruning tick outcomes past their retention at start and
// every outcomePruneEvery. close stops it.
func (a *app) startUpkeep() error {
	if a.readOnly || a.cfg.OutcomeRetention <= 0 {
		return nil
	}
	s, err := gocron.NewScheduler(gocron.WithClock(a.clock))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	prune := func() {
		n, err := a.pruneOutcomes(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			a.log.Warn().Err(err).Int("deleted", n).Msg("pruning tick outcomes failed")
		case n > 0:
			a.log.Debug().Int("deleted", n).Dur("retention", a.cfg.OutcomeRetention).Msg("tick outcomes pruned")
		}
	}
	if _, err := s.NewJob(gocron.DurationJob(outcomePruneEvery), gocron.NewTask(prune), gocron.WithName("prune-outcomes"),
		gocron.WithSingletonMode(gocron.LimitModeReschedule), gocron.WithStartAt(gocron.WithStartImmediately())); err != nil {
		cancel()
		s.Shutdown()
		return err
	}
	a.upkeep, a.stopUpkeep = s, cancel
	s.Start()
	return nil
}

// walSize is the size of the write-ahead log of the SQLite file dsn, 0 when
// there is none.
func walSize(dsn string) int64 {
	path, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		return 0
	}
	return fi.Size()
}

// close stops the schedules, finishes in-flight work and closes the database.
func (a *app) close(ctx context.Context) error {
	var errs []error
	if a.upkeep != nil {
		a.stopUpkeep()
		errs = append(errs, a.upkeep.Shutdown())
	}
	if a.scheduler != nil { // its goroutine runs from creation, started or not
		errs = append(errs, a.scheduler.Shutdown())
	}
	if a.engine != nil {
		errs = append(errs, a.engine.Close(ctx))
	}
	if a.leases != nil { // after the engine: its NPCs go to the other daemons at once
		errs = append(errs, a.leases.Close(ctx))
	}
	if a.retriever != nil && !a.readOnly {
		errs = append(errs, a.retriever.Flush(ctx)) // recorded memory accesses
	}
	errs = append(errs, store.Close(a.db))
	return errors.Join(errs...)
}
