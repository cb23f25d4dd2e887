package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/npcd/npcd/bench"
	"github.com/npcd/npcd/tick"
)

func benchCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure npcd in-process on a temporary database (builtin model)",
	}
	h := benchHarness()
	var tb bench.TickOptions
	ticks := &cobra.Command{
		Use:   "ticks",
		Short: "Tick throughput and npcd's own overhead per tick, for each NPC count",
		Long: `Ticks many NPCs in-process (each round posts one event to every NPC, then ticks them all
with concurrent workers) and reports ticks per second, npcd's overhead per tick without the
model's time (p50/p95/p99), CPU time, allocations per tick and the process's peak RSS.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return bench.Ticks(cmd.Context(), stdout, stderr, h, tb) },
	}
	f := ticks.Flags()
	f.IntSliceVar(&tb.NPCs, "npcs", []int{1, 100}, "NPC counts to measure")
	f.IntVar(&tb.Ticks, "ticks", 2000, "ticks per measurement")
	f.IntVar(&tb.History, "history", 0, "tokens of archived history each NPC holds before the run")
	f.IntVar(&tb.Others, "others", 0, "messages of other NPCs (never ticked) in the database before the run, e.g. 1000000")
	f.DurationVar(&tb.Latency, "latency", 0, "latency of each model call (a fake model in front of the builtin one), e.g. 200ms")
	f.IntVar(&tb.Workers, "workers", tick.MaxBatchWorkers, "ticks run at once")
	f.BoolVar(&tb.JSON, "json", false, "print one JSON object per measurement")
	f.BoolVar(&tb.HTTP, "http", false, "tick through the real daemon on a loopback port: one client request per NPC tick, then batches of 100 (latencies include the model)")

	var to bench.TokenOptions
	tokens := &cobra.Command{
		Use:   "tokens",
		Short: "Prompt tokens per tick of a long run against unbounded history and drop-the-oldest-half truncation, with planted facts",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return bench.Tokens(cmd.Context(), stdout, stderr, h, to) },
	}
	f = tokens.Flags()
	f.IntVar(&to.Turns, "turns", 1500, "turns to replay")
	f.IntVar(&to.Window, "window", 8192, "context window of the NPC (and the truncation baseline)")
	f.IntVar(&to.ObsBytes, "observation-bytes", 1200, "size of each look observation")
	f.IntVar(&to.FactEvery, "fact-every", 15, "plant a fact every this many turns")
	f.IntVar(&to.SleepEvery, "sleep-every", 100, "sleep (a night) every this many turns; 0 never")
	f.BoolVar(&to.JSON, "json", false, "one JSON object a line per strategy")

	budget := &cobra.Command{
		Use:   "budget",
		Short: "Cost of a budget check at 1k and 100k history tokens, against recounting the history",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return bench.Budget(cmd.Context(), stdout, h) },
	}
	var messages int
	plan := &cobra.Command{
		Use:   "plan",
		Short: "Compaction planning time on a long history",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return bench.Plan(cmd.Context(), stdout, h, messages) },
	}
	plan.Flags().IntVar(&messages, "messages", 10000, "messages in the history")
	var turns, window, obsBytes int
	masking := &cobra.Command{
		Use:   "masking",
		Short: "Prompt tokens per tick of a long run with tool observations, masking on and off",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.Masking(cmd.Context(), stdout, stderr, h, turns, window, obsBytes)
		},
	}
	masking.Flags().IntVar(&turns, "turns", 1000, "turns to run")
	masking.Flags().IntVar(&window, "window", 8192, "context window of the NPC")
	masking.Flags().IntVar(&obsBytes, "observation-bytes", 2000, "size of each look observation")

	var npcs, entries, workers int
	sweep := &cobra.Command{
		Use:   "sleep",
		Short: "Wall time of a sleep sweep over many NPCs (consolidation and compaction, builtin model)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.SleepSweep(cmd.Context(), stdout, h, npcs, entries, workers)
		},
	}
	sweep.Flags().IntVar(&npcs, "npcs", 1000, "NPCs to put to sleep")
	sweep.Flags().IntVar(&entries, "entries", 20, "journal entries each NPC consolidates")
	sweep.Flags().IntVar(&workers, "workers", 8, "sleeps run at once")
	var scheduled int
	var idle time.Duration
	sched := &cobra.Command{
		Use:   "schedule",
		Short: "Idle CPU and memory cost of many scheduled NPC sleeps",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return bench.Schedule(stdout, scheduled, idle) },
	}
	sched.Flags().IntVar(&scheduled, "npcs", 10000, "NPCs with a sleep schedule")
	sched.Flags().DurationVar(&idle, "idle", 30*time.Second, "how long to watch the idle scheduler")
	cmd.AddCommand(ticks, budget, plan, masking, tokens, sweep, sched)
	return cmd
}

// benchHarness gives the measurements the daemon's own wiring on
// temporary databases.
func benchHarness() bench.Harness {
	return bench.Harness{
		Open: func(ctx context.Context, opt bench.Options) (*bench.World, func(), error) {
			dir, err := os.MkdirTemp("", "npcd-bench-")
			if err != nil {
				return nil, nil, err
			}
			cfg := defaultConfig()
			cfg.DB = filepath.Join(dir, "bench.db")
			a, err := openApp(ctx, cfg, zerolog.Nop(), appOptions{remote: opt.Remote, tickConfig: opt.TickConfig})
			if err != nil {
				os.RemoveAll(dir)
				return nil, nil, err
			}
			w := &bench.World{Engine: a.engine, Chars: a.chars, Journal: a.journal, Retriever: a.retriever}
			return w, func() { a.close(context.Background()); os.RemoveAll(dir) }, nil
		},
		Serve: func(ctx context.Context, maxCalls int) (string, func(), error) {
			dir, err := os.MkdirTemp("", "npcd-bench-http-")
			if err != nil {
				return "", nil, err
			}
			cfg := defaultConfig()
			cfg.Addr, cfg.DB, cfg.LogLevel = "127.0.0.1:0", filepath.Join(dir, "bench.db"), "error"
			cfg.MaxConcurrentCalls = max(cfg.MaxConcurrentCalls, maxCalls)
			sctx, stop := context.WithCancel(ctx)
			ready := make(chan string, 1)
			done := make(chan error, 1)
			go func() { done <- serve(sctx, cfg, io.Discard, ready) }()
			select {
			case addr := <-ready:
				return addr, func() { stop(); <-done; os.RemoveAll(dir) }, nil
			case err := <-done:
				stop()
				os.RemoveAll(dir)
				return "", nil, fmt.Errorf("serve: %w", err)
			}
		},
	}
}
