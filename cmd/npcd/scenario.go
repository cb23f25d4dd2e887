package main

import (
	"context"
	"errors"
	"io"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/scenarios"
)

func scenarioCommand(stdout, stderr io.Writer, getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenario",
		Short: "Script an NPC's life and check that it behaves and remembers",
	}
	o := scenarios.FilesOptions{Out: stdout, Progress: stderr, Open: scenarioOpener(getenv)}
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
			passed, err := scenarios.RunFiles(cmd.Context(), files, o)
			if err == nil && !passed {
				return errFailed
			}
			return err
		},
	}
	runCmd.Flags().BoolVar(&o.JSON, "json", false, "print the reports as JSON")
	runCmd.Flags().StringVar(&o.Model, "model", "", "model to run with instead of the file's: builtin, scripted or openai (the endpoint of NPCD_LLM_BASE_URL with NPCD_LLM_API_KEY and NPCD_MODEL)")
	runCmd.Flags().StringVar(&o.Keep, "keep-db", "", "keep the scenario's database at this new file, for npcd aihistory --db")
	cmd.AddCommand(runCmd)
	return cmd
}

// scenarioOpener wires a scenario on the daemon's own wiring: its game
// clock drives the engine and the sleep schedule, and a scripted model
// answers in front of the builtin one.
func scenarioOpener(getenv func(string) string) scenarios.Opener {
	return func(ctx context.Context, sc *scenarios.Scenario, model, path string, gc *scenarios.GameClock) (scenarios.Env, func(), error) {
		// Builtin and scripted runs ignore the environment, so that a file
		// gives the same result on every machine.
		cfg := defaultConfig()
		if model == scenarios.ModelOpenAI {
			var err error
			if cfg, err = configFromEnv(getenv); err != nil {
				return scenarios.Env{}, nil, err
			}
			if cfg.LLMBaseURL == "" {
				return scenarios.Env{}, nil, errors.New("the openai model needs an endpoint: set NPCD_LLM_BASE_URL (and NPCD_LLM_API_KEY, NPCD_MODEL)")
			}
		}
		cfg.DB = path
		// A scenario replays the same way every run: the compactions its
		// ticks need run inside them, at a known tick.
		cfg.BackgroundCompaction = false
		opt := appOptions{clock: gc.Clock(), slept: gc.Slept}
		if model == scenarios.ModelScripted {
			opt.remote = scenarios.NewScripted(sc.Script, llm.NewBuiltin())
		}
		a, err := openApp(ctx, cfg, zerolog.Nop(), opt)
		if err != nil {
			return scenarios.Env{}, nil, err
		}
		done := func() { a.close(context.Background()) }
		if sc.ScheduledSleeps {
			if err := a.startSchedules(ctx); err != nil {
				done()
				return scenarios.Env{}, nil, err
			}
			gc.Follow(a.scheduler)
		}
		return scenarios.Env{Engine: a.engine, Characters: a.chars, Journal: a.journal, Compactions: a.compactor,
			Memory: a.retriever, Clock: gc}, done, nil
	}
}
