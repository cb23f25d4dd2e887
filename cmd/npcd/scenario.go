package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/scenarios"
	"github.com/npcd/npcd/sleep"
)

func scenarioCommand(stdout, stderr io.Writer, getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenario",
		Short: "Script an NPC's life and check that it behaves and remembers",
	}
	var asJSON bool
	var model, keep string
	runCmd := &cobra.Command{
		Use:   "run FILE...",
		Short: "Run scenario files in-process, each on a temporary database, and check their expectations",
		Long: `Run scenario files in-process, each on a temporary database that is deleted afterwards.
Every file is validated before any runs. Progress goes to stderr; each failed expectation and a
summary per file go to stdout. The exit code is 1 when an expectation failed or a step could
not run, 2 when a file is not a valid scenario.

The model is the file's (builtin by default) unless --model says otherwise; openai plays the
scenario against the endpoint of NPCD_LLM_BASE_URL (with NPCD_LLM_API_KEY and NPCD_MODEL), for
playtesting: its answers are not deterministic.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if keep != "" && len(files) != 1 {
				return errors.New("--keep-db: give one scenario file")
			}
			return runScenarios(cmd.Context(), stdout, stderr, getenv, files, model, asJSON, keep)
		},
	}
	runCmd.Flags().BoolVar(&asJSON, "json", false, "print the reports as JSON")
	runCmd.Flags().StringVar(&model, "model", "", "model to run with instead of the file's: builtin, scripted or openai (the endpoint of NPCD_LLM_BASE_URL with NPCD_LLM_API_KEY and NPCD_MODEL)")
	runCmd.Flags().StringVar(&keep, "keep-db", "", "keep the scenario's database at this new file, for npcd aihistory --db")
	cmd.AddCommand(runCmd)
	return cmd
}

// runScenarios validates every file, then runs them one after the other.
func runScenarios(ctx context.Context, stdout, stderr io.Writer, getenv func(string) string, files []string, model string, asJSON bool, keep string) error {
	if keep != "" {
		if _, err := os.Stat(keep); err == nil {
			return fmt.Errorf("--keep-db: %s exists; give a new file", keep)
		}
	}
	var scs []*scenarios.Scenario
	var bad []error
	for _, f := range files {
		sc, err := scenarios.Load(f)
		if err == nil {
			_, err = scenarios.ModelFor(sc, model)
		}
		if err != nil {
			bad = append(bad, err)
			continue
		}
		scs = append(scs, sc)
	}
	if len(bad) > 0 {
		return errors.Join(bad...)
	}
	var reports []*scenarios.Report
	failed := false
	for i, sc := range scs {
		p := newScenarioProgress(stderr, fmt.Sprintf("[%d/%d] %s", i+1, len(scs), filepath.Base(sc.File)))
		var rep *scenarios.Report
		var err error
		if keep != "" {
			rep, err = runScenarioAt(ctx, sc, model, getenv, p.update, keep)
		} else {
			rep, err = runScenario(ctx, sc, model, getenv, p.update)
		}
		p.done()
		if err != nil {
			return fmt.Errorf("%s: %w", sc.File, err)
		}
		reports = append(reports, rep)
		failed = failed || !rep.Passed
		if !asJSON {
			printScenarioReport(stdout, rep)
		}
	}
	if asJSON {
		if err := printJSON(stdout, reports); err != nil {
			return err
		}
	} else {
		printScenarioTable(stdout, reports)
	}
	if failed {
		return errFailed
	}
	return nil
}

// runScenario runs one scenario on the daemon's own wiring over a fresh
// temporary database, with a fake clock at the scenario's start driving
// the engine and the sleep schedule.
func runScenario(ctx context.Context, sc *scenarios.Scenario, override string, getenv func(string) string, progress func(scenarios.Progress)) (*scenarios.Report, error) {
	dir, err := os.MkdirTemp("", "npcd-scenario-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	return runScenarioAt(ctx, sc, override, getenv, progress, filepath.Join(dir, "scenario.db"))
}

// runScenarioAt runs sc like runScenario on a new database at path, which
// it leaves behind (for npcd aihistory --db).
func runScenarioAt(ctx context.Context, sc *scenarios.Scenario, override string, getenv func(string) string, progress func(scenarios.Progress), path string) (*scenarios.Report, error) {
	model, err := scenarios.ModelFor(sc, override)
	if err != nil {
		return nil, err
	}
	// Builtin and scripted runs ignore the environment, so that a file
	// gives the same result on every machine.
	cfg := defaultConfig()
	if model == scenarios.ModelOpenAI {
		if cfg, err = configFromEnv(getenv); err != nil {
			return nil, err
		}
		if cfg.LLMBaseURL == "" {
			return nil, errors.New("the openai model needs an endpoint: set NPCD_LLM_BASE_URL (and NPCD_LLM_API_KEY, NPCD_MODEL)")
		}
	}
	cfg.DB = path

	clock := clockwork.NewFakeClockAt(sc.Start)
	gc := &gameClock{fake: clock, npc: sc.NPC.ID, slept: make(chan sleepDone, 64), wait: 5 * time.Minute}
	opt := appOptions{clock: clock, slept: gc.done}
	if model == scenarios.ModelScripted {
		opt.remote = scenarios.NewScripted(sc.Script, llm.NewBuiltin())
	}
	a, err := openApp(ctx, cfg, zerolog.Nop(), opt)
	if err != nil {
		return nil, err
	}
	defer a.close(context.Background())
	gc.sched = a.scheduler
	if sc.ScheduledSleeps {
		if err := a.startSchedules(ctx); err != nil {
			return nil, err
		}
		gc.running = true
	}
	env := scenarios.Env{Engine: a.engine, Characters: a.chars, Journal: a.journal, Compactions: a.compactor,
		Memory: a.retriever, Clock: gc}
	return scenarios.Run(ctx, sc, env, scenarios.Options{Model: override, Progress: progress})
}

// gameClock is a scenario's game clock: a fake clock read by the engine
// and the sleep scheduler, moved only by the scenario. Moving it past the
// NPC's sleep time runs the scheduled sleep, and Advance waits for it, so
// the scenario sees its effects as a game server would the next morning.
type gameClock struct {
	fake    *clockwork.FakeClock
	sched   *sleep.Scheduler
	npc     string
	running bool
	slept   chan sleepDone
	// wait bounds, in real time, how long a due sleep may take to run
	// before the scenario is stopped rather than left hanging.
	wait time.Duration
}

type sleepDone struct {
	rep *sleep.Report
	err error
}

// done is the app's hook for scheduled sleeps; it never blocks the
// scheduler.
func (g *gameClock) done(id string, rep *sleep.Report, err error) {
	select {
	case g.slept <- sleepDone{rep: rep, err: err}:
	default:
	}
}

func (g *gameClock) Now() time.Time { return g.fake.Now() }

func (g *gameClock) Advance(ctx context.Context, d time.Duration) ([]*sleep.Report, error) {
	target := g.fake.Now().Add(d)
	var reps []*sleep.Report
	for {
		now := g.fake.Now()
		if !g.running {
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

// scenarioProgress shows a run's progress on stderr: one line rewritten in
// place on a terminal, a line per step (and per tenth of a repeat)
// otherwise.
type scenarioProgress struct {
	w        io.Writer
	label    string
	terminal bool
	last     string
	shown    bool
}

func newScenarioProgress(w io.Writer, label string) *scenarioProgress {
	p := &scenarioProgress{w: w, label: label}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.terminal = true
		}
	}
	return p
}

func (p *scenarioProgress) update(pr scenarios.Progress) {
	line := fmt.Sprintf("%s: step %d/%d %s", p.label, pr.Step, pr.Steps, pr.Kind)
	if pr.Iterations > 0 {
		line += fmt.Sprintf(" %d/%d", pr.Iteration, pr.Iterations)
		tenth := max(1, pr.Iterations/10)
		if !p.terminal && pr.Iteration%tenth != 0 && pr.Iteration != 1 {
			return
		}
	}
	if line == p.last {
		return
	}
	p.last, p.shown = line, true
	if p.terminal {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

func (p *scenarioProgress) done() {
	if p.terminal && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func printScenarioReport(w io.Writer, rep *scenarios.Report) {
	verdict := "PASS"
	if !rep.Passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "%s %s — %s (%s model)\n", verdict, rep.File, rep.Name, rep.Model)
	for _, f := range rep.Failures {
		fmt.Fprintf(w, "  %s\n", strings.ReplaceAll(f.String(), "\n", "\n  "))
	}
	if n := rep.Failed - len(rep.Failures); n > 0 {
		fmt.Fprintf(w, "  … and %d more failed checks\n", n)
	}
	if rep.Error != "" {
		fmt.Fprintf(w, "  stopped: %s\n", rep.Error)
	}
	fmt.Fprintf(w, "  steps %d, ticks %d, checks %d (%d failed); sleeps %d (%d scheduled); compactions: %s; utilization at the end %.3f; game time %s → %s\n",
		rep.Steps, rep.Ticks, rep.Checks, rep.Failed, rep.Sleeps, rep.ScheduledSleeps, compactionCounts(rep.Compactions),
		rep.Utilization, rep.GameStart.Format("2006-01-02 15:04"), rep.GameEnd.Format("2006-01-02 15:04"))
}

func compactionCounts(m map[string]int) string {
	var parts []string
	for _, t := range sleep.Triggers {
		if m[t] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[t], t))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func printScenarioTable(w io.Writer, reps []*scenarios.Report) {
	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.SetStyle(table.StyleLight)
	t.AppendHeader(table.Row{"result", "file", "model", "ticks", "checks", "failed", "compactions", "time"})
	for _, r := range reps {
		verdict := "pass"
		if !r.Passed {
			verdict = "FAIL"
		}
		d := time.Duration(r.DurationMS) * time.Millisecond
		if d >= time.Second {
			d = d.Round(100 * time.Millisecond)
		}
		t.AppendRow(table.Row{verdict, filepath.Base(r.File), r.Model, r.Ticks, r.Checks, r.Failed, compactionCounts(r.Compactions), d.String()})
	}
	t.Render()
}
