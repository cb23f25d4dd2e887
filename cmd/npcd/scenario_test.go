package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/npcd/npcd/scenarios"
	"github.com/npcd/npcd/tick"
)

// TestExampleScenariosPass runs every example scenario the way
// "npcd scenario run" does, on the daemon's own wiring: each is a test of
// the product, and fails here when one of its expectations does.
func TestExampleScenariosPass(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "scenarios", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("found %d example scenarios, want at least 4", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			sc, err := scenarios.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := scenarios.RunTemp(context.Background(), sc, "", scenarioOpener(noEnv), nil)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Error != "" {
				t.Errorf("stopped: %s", rep.Error)
			}
			for _, fl := range rep.Failures {
				t.Errorf("%s", fl)
			}
			if rep.Checks == 0 || rep.Ticks == 0 {
				t.Errorf("%d checks and %d ticks: the scenario tested nothing", rep.Checks, rep.Ticks)
			}
			t.Logf("%d ticks, %d checks, compactions %v, %d sleeps (%d scheduled), %dms",
				rep.Ticks, rep.Checks, rep.Compactions, rep.Sleeps, rep.ScheduledSleeps, rep.DurationMS)
		})
	}
}

func noEnv(string) string { return "" }

// TestSameFileSameReport runs an example with scheduled sleeps, compactions
// and memory searches twice: the reports are the same but for how long the
// runs took.
func TestSameFileSameReport(t *testing.T) {
	sc, err := scenarios.Load(filepath.Join("..", "..", "scenarios", "examples", "blacksmith.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var reps []*scenarios.Report
	for i := 0; i < 2; i++ {
		rep, err := scenarios.RunTemp(context.Background(), sc, "", scenarioOpener(noEnv), nil)
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, rep)
	}
	if diff := cmp.Diff(reps[0], reps[1], cmpopts.IgnoreFields(scenarios.Report{}, "DurationMS")); diff != "" {
		t.Errorf("two runs of the same file differ (-first +second):\n%s", diff)
	}
	if reps[0].ScheduledSleeps == 0 || len(reps[0].Compactions) == 0 {
		t.Errorf("the run had no scheduled sleep or no compaction to be deterministic about: %+v", reps[0])
	}
}

func writeScenario(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const smallScenario = `name: a small scenario
start: 2026-03-02T09:00:00Z
npc:
  id: brom
  name: Brom
  persona: You are Brom, the gruff village blacksmith of Oakvale.
steps:
  - event: {actor: Alice, text: "I lost my sword at the forge."}
    tick: once
    expect:
      - action: {tool: say, contains: keep an eye out}
`

func TestScenarioRunCommand(t *testing.T) {
	dir := t.TempDir()
	good := writeScenario(t, dir, "good.yaml", smallScenario)
	bad := writeScenario(t, dir, "bad.yaml", smallScenario+`      - action: {tool: say, contains: dragon}
`)
	broken := writeScenario(t, dir, "broken.yaml", strings.Replace(smallScenario, "tick: once", "tick: forever", 1))
	scripted := writeScenario(t, dir, "scripted.yaml", strings.Replace(smallScenario, "steps:", `model: scripted
script:
  default: {say: "Not my trade today."}
steps:`, 1))
	tests := []struct {
		name       string
		args       []string
		wantErr    error // nil, errFailed, or errAny for another error
		wantOut    []string
		wantStderr []string
	}{
		{"a passing file", []string{good}, nil,
			[]string{"PASS " + good, "steps 1, ticks 1, checks 1 (0 failed)", "│ pass"}, []string{"[1/1] good.yaml: step 1/1 events"}},
		{"a failing file", []string{good, bad}, errFailed,
			[]string{"FAIL " + bad, "step 1, line 12, action:", `expected at least 1 say actions containing "dragon"`, "found    none of 1 say actions", "│ FAIL"},
			[]string{"[1/2] good.yaml", "[2/2] bad.yaml"}},
		{"a broken file stops everything before it runs", []string{good, broken}, errAny,
			[]string{}, []string{}},
		{"the model from the command line", []string{"--model", "builtin", scripted}, nil,
			[]string{"(builtin model)"}, nil},
		{"the file's scripted model", []string{scripted}, errFailed,
			[]string{"(scripted model)", `found    none of 1 say actions; the latest: "say: Not my trade today."`}, nil},
		{"scripted without a script", []string{"--model", "scripted", good}, errAny, []string{}, nil},
		{"an unknown model", []string{"--model", "gpt", good}, errAny, []string{}, nil},
		{"openai without an endpoint", []string{"--model", "openai", good}, errAny, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), append([]string{"scenario", "run"}, tt.args...), &stdout, &stderr, noEnv)
			switch {
			case tt.wantErr == nil && err != nil, tt.wantErr == errFailed && !errors.Is(err, errFailed), tt.wantErr == errAny && (err == nil || errors.Is(err, errFailed)):
				t.Fatalf("err = %v, want %v\nstdout:\n%s", err, tt.wantErr, stdout.String())
			}
			if tt.wantOut != nil && len(tt.wantOut) == 0 && stdout.Len() > 0 {
				t.Errorf("something ran:\n%s", stdout.String())
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

// errAny stands for an error other than errFailed: the exit code 2 of a
// file that is not a valid scenario, or of a bad flag.
var errAny = errors.New("any error but errFailed")

func TestScenarioRunReportsBrokenFilesWithLineAndField(t *testing.T) {
	dir := t.TempDir()
	broken := writeScenario(t, dir, "broken.yaml", strings.Replace(smallScenario, "tick: once", "tick: forever", 1))
	err := run(context.Background(), []string{"scenario", "run", broken}, &bytes.Buffer{}, &bytes.Buffer{}, noEnv)
	want := broken + `:9:11: steps[0].tick: must be once, until_idle or a number of ticks, not the text "forever"`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	if exitCode(err) != 2 {
		t.Errorf("exit code %d, want 2", exitCode(err))
	}
}

func TestScenarioRunJSON(t *testing.T) {
	dir := t.TempDir()
	good := writeScenario(t, dir, "good.yaml", smallScenario)
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"scenario", "run", "--json", good, good}, &stdout, &bytes.Buffer{}, noEnv); err != nil {
		t.Fatal(err)
	}
	var reps []scenarios.Report
	if err := json.Unmarshal(stdout.Bytes(), &reps); err != nil {
		t.Fatalf("output is not a JSON list of reports: %v\n%s", err, stdout.String())
	}
	if len(reps) != 2 || !reps[0].Passed || reps[0].Ticks != 1 || reps[1].Checks != 1 || reps[0].File != good {
		t.Errorf("reports: %+v", reps)
	}
}

// TestScheduledSleepsFollowTheGameClock moves the game clock over three of
// the NPC's nights: each sleep runs once, at its time, on the real
// scheduler; with scheduled sleeps off, none does.
func TestScheduledSleepsFollowTheGameClock(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	text := `name: three nights
start: 2026-03-02T09:00:00Z
npc:
  name: Brom
  persona: You are Brom, the gruff village blacksmith of Oakvale.
  sleep: {cron: "0 22 * * *", timezone: Europe/Paris}
steps:
  - repeat:
      count: 3
      steps:
        - event: {actor: Alice, text: "Day {{i}}: I need {{i}} horseshoes."}
          tick: once
        - advance: 1d
  - advance: 1h
    expect:
      - sleeps: {scheduled: true, exactly: 3}
      - memory_search: {query: horseshoes, contains: horseshoes}
`
	tests := []struct {
		name      string
		scheduled bool
		want      int
	}{
		{"schedule on", true, 3},
		{"schedule off", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := text
			if !tt.scheduled {
				src = strings.Replace(text, "start:", "scheduled_sleeps: false\nstart:", 1)
			}
			sc, err := scenarios.Parse("nights.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := scenarios.RunTemp(context.Background(), sc, "", scenarioOpener(noEnv), nil)
			if err != nil {
				t.Fatal(err)
			}
			if rep.ScheduledSleeps != tt.want || rep.Sleeps != tt.want {
				t.Errorf("%d sleeps, %d scheduled; want %d", rep.Sleeps, rep.ScheduledSleeps, tt.want)
			}
			if got, want := rep.GameEnd.Sub(rep.GameStart).Hours(), 73.0; got < want || got > want+0.01 {
				t.Errorf("the game clock moved %.3fh, want %.0fh (and at most a second per sleep more)", got, want)
			}
			if tt.scheduled && !rep.Passed {
				t.Errorf("failures: %v, error %q", rep.Failures, rep.Error)
			}
		})
	}
}

// A scenario replays the same way every run: the compactions its ticks need
// run inside them, never beside them at a moment the run does not fix, even
// though the daemon compacts beside the ticks by default.
func TestScenariosCompactInsideTheTicks(t *testing.T) {
	sc := &scenarios.Scenario{Model: scenarios.ModelBuiltin, Start: scenarios.DefaultStart()}
	env, done, err := scenarioOpener(os.Getenv)(context.Background(), sc, scenarios.ModelBuiltin,
		filepath.Join(t.TempDir(), "scenario.db"), scenarios.NewGameClock(scenarios.DefaultStart(), "brom"))
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	eng, ok := env.Engine.(*tick.Engine)
	if !ok {
		t.Fatalf("the scenario's engine is a %T", env.Engine)
	}
	if eng.Config().BackgroundCompaction {
		t.Fatal("a scenario's engine compacts beside the ticks")
	}
	if !defaultConfig().BackgroundCompaction {
		t.Fatal("the daemon's default no longer compacts beside the ticks: this test checks nothing")
	}
}
