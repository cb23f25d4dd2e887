package sleep

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/npcd/npcd/character"
)

// Sleeper runs one sleep of an NPC; *Runner implements it.
type Sleeper interface {
	Sleep(ctx context.Context, id string) (*Report, error)
}

// ScheduleConfig configures the scheduler. Zero fields take their defaults.
type ScheduleConfig struct {
	// DefaultCron is the world's sleep schedule for NPCs without one;
	// default "0 3 * * *" (03:00 every day).
	DefaultCron string
	// DefaultTimezone applies to NPCs without a time zone; default UTC.
	DefaultTimezone string
	// Timeout bounds one scheduled sleep; default 10m.
	Timeout time.Duration
	Clock   clockwork.Clock // default: the real clock
	Log     zerolog.Logger
	// Done, when set, is told about every scheduled sleep once it ends,
	// with its wall time (metrics, a scenario's game clock). It must not
	// block.
	Done func(id string, took time.Duration, rep *Report, err error)
}

// Scheduler runs each NPC's sleep on its cron schedule, one gocron job per
// NPC named "npcd-sleep:<id>" (the name a distributed locker keys on), in
// singleton mode so runs of one NPC never overlap. It is safe for
// concurrent use.
type Scheduler struct {
	cfg     ScheduleConfig
	s       gocron.Scheduler
	sleeper Sleeper
	loc     *time.Location

	mu   sync.Mutex
	jobs map[string]scheduled
}

type scheduled struct {
	id      uuid.UUID
	crontab string
}

// JobName is the gocron job name of an NPC's sleep.
func JobName(id string) string { return "npcd-sleep:" + id }

// NewScheduler builds a scheduler; call Start to run it and Shutdown to stop.
func NewScheduler(cfg ScheduleConfig, sleeper Sleeper) (*Scheduler, error) {
	if cfg.DefaultCron == "" {
		cfg.DefaultCron = "0 3 * * *"
	}
	if cfg.DefaultTimezone == "" {
		cfg.DefaultTimezone = "UTC"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if sleeper == nil {
		return nil, errors.New("sleep: scheduler needs a sleeper")
	}
	loc, err := time.LoadLocation(cfg.DefaultTimezone)
	if err != nil {
		return nil, fmt.Errorf("sleep: default time zone %q: %w", cfg.DefaultTimezone, err)
	}
	sc := &Scheduler{cfg: cfg, sleeper: sleeper, loc: loc, jobs: map[string]scheduled{}}
	if err := CheckCron(cfg.DefaultCron, cfg.DefaultTimezone, cfg.Clock.Now()); err != nil {
		return nil, fmt.Errorf("sleep: default schedule: %w", err)
	}
	sc.s, err = gocron.NewScheduler(gocron.WithClock(cfg.Clock), gocron.WithLocation(loc), gocron.WithStopTimeout(cfg.Timeout))
	if err != nil {
		return nil, fmt.Errorf("sleep: scheduler: %w", err)
	}
	return sc, nil
}

// CheckCron reports whether expr (minute hour day month weekday) is a
// schedule sleeps can run on in time zone tz, as of now. The time zone goes
// in tz, never in the expression. The daemon and the scenario loader both
// check schedules with it.
func CheckCron(expr, tz string, now time.Time) error {
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return errors.New("give the time zone in sleep.timezone, not in the expression")
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return err
	}
	return gocron.NewDefaultCron(false).IsValid(expr, loc, now)
}

// crontab is an NPC's schedule with its time zone, the world's defaults
// filling what it leaves out.
func (sc *Scheduler) crontab(c *character.Character) string {
	expr, tz := c.Sleep.Cron, c.Sleep.Timezone
	if expr == "" {
		expr = sc.cfg.DefaultCron
	}
	if tz == "" {
		tz = sc.cfg.DefaultTimezone
	}
	return "CRON_TZ=" + tz + " " + expr
}

// Check validates an NPC's schedule settings without scheduling anything.
func (sc *Scheduler) Check(c *character.Character) error {
	tz := c.Sleep.Timezone
	if tz == "" {
		tz = sc.cfg.DefaultTimezone
	}
	if c.Sleep.Cron == "" {
		return nil
	}
	if err := CheckCron(c.Sleep.Cron, tz, sc.cfg.Clock.Now()); err != nil {
		return &character.FieldError{Field: "sleep.cron", Message: fmt.Sprintf("%q is not a cron expression (minute hour day month weekday): %v", c.Sleep.Cron, err)}
	}
	return nil
}

// Schedule adds the NPC's sleep job, or updates it when its schedule changed.
func (sc *Scheduler) Schedule(c *character.Character) error {
	if err := sc.Check(c); err != nil {
		return err
	}
	crontab := sc.crontab(c)
	id := c.ID
	sc.mu.Lock()
	defer sc.mu.Unlock()
	cur, ok := sc.jobs[id]
	if ok && cur.crontab == crontab {
		return nil
	}
	def := gocron.CronJob(crontab, false)
	task := gocron.NewTask(func() { sc.run(id) })
	opts := []gocron.JobOption{gocron.WithName(JobName(id)), gocron.WithSingletonMode(gocron.LimitModeWait)}
	// A changed schedule replaces the job rather than updating it in place:
	// gocron's in-place update was seen to swap the timings of two jobs.
	if ok {
		if err := sc.s.RemoveJob(cur.id); err != nil {
			return fmt.Errorf("reschedule sleep of %q: %w", id, err)
		}
		delete(sc.jobs, id)
	}
	job, err := sc.s.NewJob(def, task, opts...)
	if err != nil {
		return fmt.Errorf("schedule sleep of %q: %w", id, err)
	}
	sc.jobs[id] = scheduled{id: job.ID(), crontab: crontab}
	return nil
}

// Unschedule removes the NPC's sleep job, if any.
func (sc *Scheduler) Unschedule(id string) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	cur, ok := sc.jobs[id]
	if !ok {
		return
	}
	delete(sc.jobs, id)
	if err := sc.s.RemoveJob(cur.id); err != nil {
		sc.cfg.Log.Warn().Err(err).Str("npc", id).Msg("remove sleep job")
	}
}

// Restore schedules every NPC, as at start-up.
func (sc *Scheduler) Restore(cs []character.Character) error {
	var errs []error
	for i := range cs {
		if err := sc.Schedule(&cs[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// NextRun returns when the NPC's next sleep is due.
func (sc *Scheduler) NextRun(id string) (time.Time, bool) {
	sc.mu.Lock()
	cur, ok := sc.jobs[id]
	sc.mu.Unlock()
	if !ok {
		return time.Time{}, false
	}
	for _, j := range sc.s.Jobs() {
		if j.ID() == cur.id {
			t, err := j.NextRun()
			return t, err == nil && !t.IsZero()
		}
	}
	return time.Time{}, false
}

// Len is the number of scheduled NPCs.
func (sc *Scheduler) Len() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return len(sc.jobs)
}

// Start begins running jobs.
func (sc *Scheduler) Start() { sc.s.Start() }

// Shutdown stops the scheduler, waiting up to the configured timeout for
// running sleeps.
func (sc *Scheduler) Shutdown() error { return sc.s.Shutdown() }

func (sc *Scheduler) run(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), sc.cfg.Timeout)
	defer cancel()
	start, began := sc.cfg.Clock.Now(), time.Now()
	rep, err := sc.sleeper.Sleep(ctx, id)
	if sc.cfg.Done != nil {
		sc.cfg.Done(id, time.Since(began), rep, err)
	}
	if err != nil {
		if errors.Is(err, character.ErrNotFound) {
			sc.Unschedule(id) // deleted behind our back
			return
		}
		sc.cfg.Log.Error().Err(err).Str("npc", id).Msg("scheduled sleep failed")
		return
	}
	ev := sc.cfg.Log.Info().Str("npc", id).Bool("skipped", rep.Skipped).Int("consolidated", rep.Consolidated).
		Int("memories_added", rep.MemoriesAdded).Dur("took", sc.cfg.Clock.Since(start))
	if rep.Compaction != nil {
		ev = ev.Int64("compaction", rep.Compaction.ID)
	}
	ev.Msg("slept")
}

// SleeperFunc adapts a function to Sleeper.
type SleeperFunc func(ctx context.Context, id string) (*Report, error)

// Sleep calls f.
func (f SleeperFunc) Sleep(ctx context.Context, id string) (*Report, error) { return f(ctx, id) }
