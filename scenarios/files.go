package scenarios

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"

	"github.com/npcd/npcd/internal/text"
	"github.com/npcd/npcd/sleep"
)

// Opener wires npcd for one scenario, on a new database at path, with
// model (as ModelFor decides it) and the scenario's game clock; done
// releases what it opened, leaving the database.
type Opener func(ctx context.Context, sc *Scenario, model, path string, clock *GameClock) (env Env, done func(), err error)

// FilesOptions configure RunFiles (`npcd scenario run`).
type FilesOptions struct {
	// Model overrides the files' model: builtin, scripted or openai.
	Model string
	// JSON prints the reports as JSON instead of text and a table.
	JSON bool
	// Keep, when set, is a new file the single scenario's database is kept
	// at; otherwise each runs on a temporary database, deleted afterwards.
	Keep string
	// Out receives the reports; Progress the progress of each run.
	Out, Progress io.Writer
	// Open wires npcd for each scenario.
	Open Opener
}

// RunFiles validates every file, then runs them one after the other and
// prints their reports. It reports whether every scenario passed; an error
// is a file that is not a valid scenario or a run that could not be done.
func RunFiles(ctx context.Context, files []string, o FilesOptions) (passed bool, err error) {
	if o.Keep != "" {
		if len(files) != 1 {
			return false, errors.New("--keep-db: give one scenario file")
		}
		if _, err := os.Stat(o.Keep); err == nil {
			return false, fmt.Errorf("--keep-db: %s exists; give a new file", o.Keep)
		}
	}
	var scs []*Scenario
	var bad []error
	for _, f := range files {
		sc, err := Load(f)
		if err == nil {
			_, err = ModelFor(sc, o.Model)
		}
		if err != nil {
			bad = append(bad, err)
			continue
		}
		scs = append(scs, sc)
	}
	if len(bad) > 0 {
		return false, errors.Join(bad...)
	}
	var reports []*Report
	passed = true
	for i, sc := range scs {
		p := newProgressLine(o.Progress, fmt.Sprintf("[%d/%d] %s", i+1, len(scs), filepath.Base(sc.File)))
		var rep *Report
		var err error
		if o.Keep != "" {
			rep, err = RunAt(ctx, sc, o.Model, o.Keep, o.Open, p.update)
		} else {
			rep, err = RunTemp(ctx, sc, o.Model, o.Open, p.update)
		}
		p.done()
		if err != nil {
			return false, fmt.Errorf("%s: %w", sc.File, err)
		}
		reports = append(reports, rep)
		passed = passed && rep.Passed
		if !o.JSON {
			WriteReport(o.Out, rep)
		}
	}
	if o.JSON {
		enc := json.NewEncoder(o.Out)
		enc.SetIndent("", "  ")
		return passed, enc.Encode(reports)
	}
	WriteTable(o.Out, reports)
	return passed, nil
}

// RunTemp runs sc like RunAt on a temporary database, deleted afterwards.
func RunTemp(ctx context.Context, sc *Scenario, override string, open Opener, progress func(Progress)) (*Report, error) {
	dir, err := os.MkdirTemp("", "npcd-scenario-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	return RunAt(ctx, sc, override, filepath.Join(dir, "scenario.db"), open, progress)
}

// RunAt runs sc on npcd as open wires it over a new database at path, which
// it leaves behind (for npcd aihistory --db), with a game clock at the
// scenario's start driving the engine and the sleep schedule.
func RunAt(ctx context.Context, sc *Scenario, override, path string, open Opener, progress func(Progress)) (*Report, error) {
	model, err := ModelFor(sc, override)
	if err != nil {
		return nil, err
	}
	env, done, err := open(ctx, sc, model, path, NewGameClock(sc.Start, sc.NPC.ID))
	if err != nil {
		return nil, err
	}
	defer done()
	return Run(ctx, sc, env, Options{Model: override, Progress: progress})
}

// progressLine shows a run's progress: one line rewritten in place on a
// terminal, a line per step (and per tenth of a repeat) otherwise.
type progressLine struct {
	w        io.Writer
	label    string
	terminal bool
	last     string
	shown    bool
}

func newProgressLine(w io.Writer, label string) *progressLine {
	p := &progressLine{w: w, label: label}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.terminal = true
		}
	}
	return p
}

func (p *progressLine) update(pr Progress) {
	if p.w == nil {
		return
	}
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

func (p *progressLine) done() {
	if p.terminal && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// WriteReport writes a report as text: the verdict, each failure, a
// summary line.
func WriteReport(w io.Writer, rep *Report) {
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
		rep.Steps, rep.Ticks, rep.Checks, rep.Failed, rep.Sleeps, rep.ScheduledSleeps, compactionCounts(rep.Compactions, "none"),
		rep.Utilization, rep.GameStart.Format("2006-01-02 15:04"), rep.GameEnd.Format("2006-01-02 15:04"))
}

// compactionCounts lists compactions by trigger, in sleep.Triggers order,
// or says none.
func compactionCounts(m map[string]int, none string) string {
	if s := text.Counts(m, sleep.Triggers...); s != "" {
		return s
	}
	return none
}

// WriteTable writes one table row per report.
func WriteTable(w io.Writer, reps []*Report) {
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
		t.AppendRow(table.Row{verdict, filepath.Base(r.File), r.Model, r.Ticks, r.Checks, r.Failed, compactionCounts(r.Compactions, "none"), d.String()})
	}
	t.Render()
}
