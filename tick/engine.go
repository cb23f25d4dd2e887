package tick

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/tools"
)

// Config tunes the engine. The zero value of every field means its default.
type Config struct {
	// DefaultModel is the model of NPCs that name none; default "builtin".
	DefaultModel string
	// MaxConcurrentCalls bounds model calls in flight across all NPCs; default 8.
	MaxConcurrentCalls int
	// TickTimeout bounds one tick, model calls included; default 2m.
	TickTimeout time.Duration
	// MaxEventsPerTick is how many pending events one tick consumes; the
	// rest wait for the next tick. Default 64.
	MaxEventsPerTick int
	// MaxPendingEvents is the size of each NPC's inbox. When it is full,
	// new events are refused (the API answers 429) and nothing already
	// accepted is dropped. Default 1000.
	MaxPendingEvents int
	// MaxEventTextBytes bounds one event's text; default 4096.
	MaxEventTextBytes int
	// MaxReplyBytes bounds the model's free text kept per step; default 8192.
	MaxReplyBytes int
	// MaxCallsPerStep bounds the tool calls honoured per model step; extra
	// calls are answered with an error. Default 8.
	MaxCallsPerStep int
	// WorkingContextShare is the share of the window the working context
	// (profiles of those present, recalled memories) may use; default 0.10.
	WorkingContextShare float64
	// EventShare is the share of the window one tick's perceived events may
	// take; later events wait for the next tick and an event too long on
	// its own is clipped in the prompt (stored whole). Default 0.25.
	EventShare float64
	// RecallK is how many memories the tick retrieves for new events; default 5.
	RecallK int
	// MaxToolResultBytes bounds one tool result posted by the game; default 256 KiB.
	MaxToolResultBytes int
	// MaxEventLead is how far ahead of the game's clock an event's time may
	// be: the later of the latest game time any NPC perceived and the
	// engine's clock. An event further ahead is refused, since an NPC's clock
	// only moves forward and one wrong date would pin it there. Default 366
	// days.
	MaxEventLead time.Duration
	// HistoryCacheBytes bounds the live histories kept in memory between
	// ticks, so a tick does not read its NPC's history again; default
	// DefaultHistoryCacheBytes. Least recently ticked NPCs are read from
	// the database again when it is exceeded.
	HistoryCacheBytes int64
	// ProfileCacheBytes bounds the profile lines kept in memory (their
	// strings and what each entry costs beside them), so a tick need not
	// read the profiles of those present while they have not changed;
	// default DefaultProfileCacheBytes. Lines not seen again are dropped
	// first when it is exceeded. Only SQLite keeps the profile revisions
	// the lines are checked against; on PostgreSQL it holds nothing.
	ProfileCacheBytes int64
	// BackgroundCompaction compacts an NPC's context beside its ticks once
	// a tick leaves it past the sleep threshold and close to the emergency
	// threshold, so that the next tick need not compact before it calls
	// the model (see compactBeside). Off, every compaction a tick needs
	// runs inside it; the daemon turns it on.
	BackgroundCompaction bool
	// BackgroundCompactions bounds the background compactions under way
	// at once (writing their summaries or committing them); the others
	// wait for their turn, and a tick that needs one still waiting
	// compacts itself instead of waiting for the queue. A burst of them (a
	// whole world crossing its threshold together) would otherwise take
	// the cores, the model endpoint and the database's writer from the
	// ticks. Default: half the cores, at least 1.
	BackgroundCompactions int
}

func (c *Config) applyDefaults() {
	if c.DefaultModel == "" {
		c.DefaultModel = character.DefaultModel
	}
	if c.MaxConcurrentCalls == 0 {
		c.MaxConcurrentCalls = 8
	}
	if c.TickTimeout == 0 {
		c.TickTimeout = 2 * time.Minute
	}
	if c.MaxEventsPerTick == 0 {
		c.MaxEventsPerTick = 64
	}
	if c.MaxPendingEvents == 0 {
		c.MaxPendingEvents = 1000
	}
	if c.MaxEventTextBytes == 0 {
		c.MaxEventTextBytes = 4096
	}
	if c.MaxReplyBytes == 0 {
		c.MaxReplyBytes = 8192
	}
	if c.MaxCallsPerStep == 0 {
		c.MaxCallsPerStep = 8
	}
	if c.WorkingContextShare == 0 {
		c.WorkingContextShare = 0.10
	}
	if c.RecallK == 0 {
		c.RecallK = 5
	}
	if c.EventShare == 0 {
		c.EventShare = 0.25
	}
	if c.MaxToolResultBytes == 0 {
		c.MaxToolResultBytes = 256 << 10
	}
	if c.MaxEventLead == 0 {
		c.MaxEventLead = DefaultMaxEventLead
	}
	if c.HistoryCacheBytes == 0 {
		c.HistoryCacheBytes = DefaultHistoryCacheBytes
	}
	if c.ProfileCacheBytes == 0 {
		c.ProfileCacheBytes = DefaultProfileCacheBytes
	}
	if c.BackgroundCompactions == 0 {
		c.BackgroundCompactions = max(1, runtime.GOMAXPROCS(0)/2)
	}
}

// DefaultMaxEventLead is Config.MaxEventLead's default: a year, leap day
// included, so a game may skip a season but not post a date from the wrong
// century.
const DefaultMaxEventLead = 366 * 24 * time.Hour

// Validate checks the config after defaults.
func (c *Config) Validate() error {
	switch {
	case c.MaxConcurrentCalls < 1:
		return errors.New("tick: MaxConcurrentCalls must be at least 1")
	case c.BackgroundCompactions < 1:
		return errors.New("tick: BackgroundCompactions must be at least 1")
	case c.TickTimeout < time.Second:
		return errors.New("tick: TickTimeout must be at least 1s")
	case c.MaxEventsPerTick < 1:
		return errors.New("tick: MaxEventsPerTick must be at least 1")
	case c.MaxPendingEvents < c.MaxEventsPerTick:
		return errors.New("tick: MaxPendingEvents must be at least MaxEventsPerTick")
	case c.MaxEventTextBytes < 64:
		return errors.New("tick: MaxEventTextBytes must be at least 64")
	case c.WorkingContextShare < 0 || c.WorkingContextShare > 0.5:
		return errors.New("tick: WorkingContextShare must be between 0 and 0.5")
	case c.EventShare < 0.05 || c.EventShare > 0.5:
		return errors.New("tick: EventShare must be between 0.05 and 0.5")
	case c.RecallK < 0 || c.RecallK > 50:
		return errors.New("tick: RecallK must be between 0 and 50")
	case c.MaxEventLead < time.Hour:
		return errors.New("tick: MaxEventLead must be at least 1h")
	case c.HistoryCacheBytes < 0:
		return errors.New("tick: HistoryCacheBytes must not be negative")
	case c.ProfileCacheBytes < 0:
		return errors.New("tick: ProfileCacheBytes must not be negative")
	}
	return nil
}

// Retriever finds memories relevant to what an NPC perceives.
type Retriever interface {
	Search(ctx context.Context, npc, query string, k int) ([]journal.Result, error)
}

// appender is a Retriever told of the messages a tick appended (see
// journal.Retriever.Appended).
type appender interface {
	Appended(npc string, held, rev int64, msgs []*character.Message)
}

// entryAppender is a Retriever that indexes the journal entries a commit
// added as the commit gives them (journal.Retriever.AppendedEntries).
type entryAppender interface {
	AppendedEntries(npc string, prev int64, entries []*journal.Entry)
}

// Observer is told about ticks and model calls, for metrics. Its methods
// must be quick and safe for concurrent use.
type Observer interface {
	TickDone(npc string, d time.Duration, r *Result, err error)
	ModelCall(model string, d time.Duration, u llm.Usage, err error)
	// CompactionDone counts a compaction no tick reported (a sleep's).
	CompactionDone(trigger string)
}

// Deps are the engine's collaborators. DB, Characters, Journal, Internals,
// Retriever and Builtin are required.
type Deps struct {
	DB         *gorm.DB
	Characters *character.Store
	Journal    *journal.Store
	Internals  *tools.Internals
	Retriever  Retriever
	// Remote answers NPCs whose model is not "builtin"; nil when no
	// endpoint is configured, in which case every NPC uses Builtin.
	Remote  llm.Chatter
	Builtin llm.Chatter
	// Compactor keeps the context within the window; nil disables compaction.
	Compactor Compactor
	// Scheduler keeps sleep schedules in step with NPC settings; optional.
	Scheduler Scheduler
	// Locks are the per-NPC locks; default NewLocks(). A sleep.Runner
	// given as Sleeper must share them.
	Locks sleep.Locker
	// Sleeper runs Sleep (a sleep.Runner); default a runner over Locks
	// that neither consolidates nor compacts.
	Sleeper sleep.Sleeper
	// Leases gives each NPC one owner across daemons sharing the database;
	// optional (nil: this engine owns every NPC).
	Leases Leaser
	// Owners delete their rows of an NPC when it is deleted.
	Owners   []Owner
	Clock    clockwork.Clock // default: the real clock
	Log      zerolog.Logger  // default: zerolog.Nop()
	Observer Observer        // optional
}

// Engine runs NPC ticks. It is safe for concurrent use; ticks of one NPC are
// serialized, ticks of different NPCs run in parallel.
type Engine struct {
	cfg      Config
	deps     Deps
	locks    sleep.Locker
	sem      chan struct{}
	toolsets sync.Map   // npc id → cachedSet
	settings sync.Map   // npc id → *character.Character: settings as last read, no state
	shared   *toolShare // the tools NPCs that declare the same share
	history  *historyCache
	present  *presentCache // the profile lines of those present, by revision
	lent     lentArrays    // the arrays of prompts given to models that keep none
	feed     *feedSignal   // wakes action feed readers
	commits  *committer    // groups the commits of concurrent ticks
	// committing counts the operations in flight that may commit through
	// commits (an NPC's operations, event posts: beginCommitting): at 1, a
	// commit has no one to share its transaction with.
	committing atomic.Int64
	auto       *autoTicker
	models     llm.Router

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
	// compacting holds, by NPC id, the background compaction running for
	// it (a *besideRun); bg is the context background work runs in, which
	// Close ends.
	compacting sync.Map
	// besideSlots holds a token for each background compaction under
	// way (Config.BackgroundCompactions).
	besideSlots chan struct{}
	bg          context.Context
	stopBG      context.CancelFunc
	// resultSizes holds what the last result the game posted of each
	// NPC's tool cost (toolOf → postedSize), for awaitedTokens.
	resultSizes sync.Map
	// eventsPosted holds, by NPC id, a mark for each NPC that events were posted
	// to through this engine since its last tick began: its next tick
	// reads its pending events with its glance (see glance).
	eventsPosted sync.Map

	// yield gives up the calling goroutine's core: runtime.Gosched, which
	// tests replace to count the calls (see tick).
	yield func()

	// afterIntake, when set (by tests), runs in PostEvents between the
	// read of the NPC and the transaction that stores its events.
	afterIntake func()
	// handingOver, when set (by tests), runs when a tick begins to wait
	// for the summary of a background compaction it takes over.
	handingOver func()
}

type cachedSet struct {
	updated time.Time
	set     *tools.Set
	// shared is the copy of the NPC's tools that set was taken from:
	// holding it keeps that copy shared (toolShare).
	shared *sharedTools
	// system is SystemPrompt of the NPC whose persona and name these are.
	persona, name, system string
}

// New builds an engine.
func New(deps Deps, cfg Config) (*Engine, error) {
	cfg.applyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case deps.DB == nil, deps.Characters == nil, deps.Journal == nil, deps.Internals == nil:
		return nil, errors.New("tick: DB, Characters, Journal and Internals are required")
	case deps.Builtin == nil:
		return nil, errors.New("tick: a Builtin model is required")
	case deps.Retriever == nil:
		return nil, errors.New("tick: a Retriever is required")
	}
	if deps.Clock == nil {
		deps.Clock = clockwork.NewRealClock()
	}
	if deps.Locks == nil {
		deps.Locks = NewLocks()
	}
	if deps.Sleeper == nil {
		rd := sleep.RunnerDeps{DB: deps.DB, Characters: deps.Characters, Journal: deps.Journal, Lock: deps.Locks, Clock: deps.Clock}
		if deps.Observer != nil {
			rd.Observer = deps.Observer
		}
		r, err := sleep.NewRunner(rd)
		if err != nil {
			return nil, err
		}
		deps.Sleeper = r
	}
	bg, stopBG := context.WithCancel(context.Background())
	e := &Engine{cfg: cfg, deps: deps, locks: deps.Locks, sem: make(chan struct{}, cfg.MaxConcurrentCalls),
		history: newHistoryCache(cfg.HistoryCacheBytes), shared: newToolShare(), present: newPresentCache(cfg.ProfileCacheBytes), feed: newFeedSignal(), auto: newAutoTicker(),
		models: llm.Router{Remote: deps.Remote, Builtin: deps.Builtin}, besideSlots: make(chan struct{}, cfg.BackgroundCompactions),
		bg: bg, stopBG: stopBG, yield: runtime.Gosched}
	e.commits = newCommitter(deps.DB, lateWriter(deps.Characters), func() bool { return e.committing.Load() <= 1 })
	return e, nil
}

// Config returns the engine's configuration with defaults applied.
func (e *Engine) Config() Config { return e.cfg }

// HistoryCacheStats describes the live-history cache now.
func (e *Engine) HistoryCacheStats() HistoryCacheStats { return e.history.stats() }

// Close refuses new work, stops the auto-tick timers, cancels background
// compactions (one cancelled before its commit changes nothing) and waits
// for in-flight ticks (auto-ticks included) to finish or ctx to end. Input
// an auto-tick did not answer stays pending (ResumeAutoTicks at the next
// start).
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.stopAutoTicks()
	e.stopBG()
	done := make(chan struct{})
	go func() { e.inflight.Wait(); e.auto.wg.Wait(); e.commits.stop(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("tick: close: %w", ctx.Err())
	}
}

// begin registers an operation; it fails once the engine is closing.
func (e *Engine) begin() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.inflight.Add(1)
	return nil
}

// Leaser gives each NPC one owner at a time across daemons sharing a
// database (*lease.Manager implements it).
type Leaser interface {
	// Hold takes NPC id's lease for one operation and returns the function
	// that ends it. fresh reports that what this process caches of the NPC
	// may be stale: it did not hold the lease before, or another daemon
	// held it since. A lease another daemon holds is waited for, bounded,
	// then refused with an error the API answers 409 npc_busy.
	Hold(ctx context.Context, id string) (release func(), fresh bool, err error)
}

// beginCommitting registers an operation that may commit through
// e.commits (an NPC's operation, an event post): begin's, counted in
// e.committing until endCommitting ends it.
func (e *Engine) beginCommitting() error {
	if err := e.begin(); err != nil {
		return err
	}
	e.committing.Add(1)
	return nil
}

// endCommitting ends an operation beginCommitting registered.
func (e *Engine) endCommitting() {
	e.committing.Add(-1)
	e.inflight.Done()
}

// withNPC runs fn holding NPC id's lock and its lease.
func (e *Engine) withNPC(ctx context.Context, id string, fn func(ctx context.Context) error) error {
	if err := e.beginCommitting(); err != nil {
		return err
	}
	defer e.endCommitting()
	unlock, err := e.locks.Lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	release, err := e.lease(ctx, id)
	if err != nil {
		return err
	}
	defer release()
	return fn(ctx)
}

// lease takes NPC id's lease, when leases are on, and forgets what is
// cached of the NPC when another daemon may have changed it.
func (e *Engine) lease(ctx context.Context, id string) (release func(), err error) {
	if e.deps.Leases == nil {
		return func() {}, nil
	}
	release, fresh, err := e.deps.Leases.Hold(ctx, id)
	if err != nil {
		return nil, err
	}
	if fresh {
		e.Forget(id)
	}
	return release, nil
}

// HoldNPC takes NPC id's lease, when leases are on, until release is
// called; a scheduled sleep holds it from the moment it takes its slot.
func (e *Engine) HoldNPC(ctx context.Context, id string) (release func(), err error) {
	return e.lease(ctx, id)
}

// Forget drops what the engine and the owners cache of NPC id in memory
// (its live history, its tools, its search index). The lease manager calls
// it when another daemon took the NPC.
func (e *Engine) Forget(id string) {
	e.history.drop(id)
	e.toolsets.Delete(id)
	e.settings.Delete(id)
	e.eventsPosted.Delete(id)
	for _, o := range e.deps.Owners {
		if f, ok := o.(Forgetter); ok {
			f.Forget(id)
		}
	}
}

// WithNPCLock runs fn holding NPC id's lock, so work outside the engine
// (a sleep's commit) never interleaves with a tick of the same NPC.
func (e *Engine) WithNPCLock(ctx context.Context, id string, fn func(ctx context.Context) error) error {
	return e.withNPC(ctx, id, fn)
}

// Counter returns the token counter for model.
func (e *Engine) Counter(model string) *llm.Counter {
	return e.models.Counter(model)
}

// chat calls the model within the global concurrency bound.
func (e *Engine) chat(ctx context.Context, c *character.Character, req llm.Request) (llm.Response, error) {
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return llm.Response{}, &llm.Error{Code: llm.CodeTimeout, Err: ctx.Err()}
	}
	defer func() { <-e.sem }()
	if req.Model == "" && c.Model != "builtin" {
		req.Model = c.Model
	}
	start := e.deps.Clock.Now()
	resp, err := e.models.Model(c.Model).Chat(ctx, req)
	if e.deps.Observer != nil {
		e.deps.Observer.ModelCall(c.Model, e.deps.Clock.Since(start), resp.Usage, err)
	}
	return resp, err
}

// toolSet returns the compiled tools of an NPC, cached until its settings
// change. The key is the NPC's update time, which every write of its
// settings (a PUT or PATCH, by this daemon or another) sets anew, compared
// to the microsecond: the precision every database keeps. The internal
// tools are fixed for the engine's life.
func (e *Engine) toolSet(c *character.Character) (*tools.Set, error) {
	if v, ok := e.toolsets.Load(c.ID); ok {
		cs := v.(cachedSet)
		if cs.updated.Equal(settingsRev(c)) {
			return cs.set, nil
		}
	}
	st := e.shared.of(c.Tools.V)
	set := st.compiled()
	if set == nil {
		compiled, err := tools.Compile(c.Tools.V, e.deps.Internals.Tools())
		if err != nil {
			return nil, err
		}
		set = st.adopt(compiled)
	}
	e.keepShared(c, st, set)
	return set, nil
}

// keepToolSet caches set, or the one shared by the NPCs that declare the
// same tools, as the compiled tools of NPC c as stored, and its system
// prompt.
func (e *Engine) keepToolSet(c *character.Character, set *tools.Set) {
	st := e.shared.of(c.Tools.V)
	e.keepShared(c, st, st.adopt(set))
}

// keepShared caches set, shared from st, as the compiled tools of NPC c as
// stored, and its system prompt.
func (e *Engine) keepShared(c *character.Character, st *sharedTools, set *tools.Set) {
	e.toolsets.Store(c.ID, cachedSet{updated: settingsRev(c), set: set, shared: st, persona: c.Persona, name: c.Name, system: SystemPrompt(c)})
}

// systemPrompt returns SystemPrompt(c), rendered once per version of the
// NPC's settings: from the tool set's cache when it was rendered for the
// same persona and name.
func (e *Engine) systemPrompt(c *character.Character) string {
	if v, ok := e.toolsets.Load(c.ID); ok {
		if cs := v.(cachedSet); cs.persona == c.Persona && cs.name == c.Name && cs.system != "" {
			return cs.system
		}
	}
	return SystemPrompt(c)
}

// settingsRev is what tells one version of an NPC's settings from another:
// its update time, to the microsecond.
func settingsRev(c *character.Character) time.Time {
	return c.UpdatedAt.Truncate(time.Microsecond)
}

// npc returns NPC id whole: its state and the times that date its settings
// as g holds them when it read them whole, else read (character.Store.State),
// its settings from memory when those held
// are the ones these times date, else read with the rest of its row.
// Settings change only with the update time (a PUT or PATCH, by any
// daemon), and a deleted NPC created again has another creation time.
func (e *Engine) npc(ctx context.Context, id string, g *character.Glance) (*character.Character, error) {
	var st *character.Character
	if g != nil && g.Whole() {
		st = g.NPC // the glance read the whole state: no second read
	} else {
		var err error
		if st, err = e.deps.Characters.State(ctx, id); err != nil {
			return nil, err
		}
	}
	if v, ok := e.settings.Load(id); ok {
		held := v.(*character.Character)
		if settingsRev(held).Equal(settingsRev(st)) && held.CreatedAt.Truncate(time.Microsecond).Equal(st.CreatedAt.Truncate(time.Microsecond)) {
			// st was read for this call alone: it takes the settings held.
			state := st.State
			*st = *held
			st.State = state
			return st, nil
		}
	}
	c, err := e.deps.Characters.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	held := *c
	held.State = character.State{}
	// The tools' declarations are held as the NPCs that declare the same
	// share them (toolShare): c's own copy goes with this tick.
	held.Tools.V = e.shared.of(c.Tools.V).specs
	e.settings.Store(c.ID, &held)
	return c, nil
}
