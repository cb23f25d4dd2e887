package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/tick"
)

// Command is npcd bench: each measurement a subcommand that parses its
// flags and runs on the npcd h wires.
func Command(stdout, stderr io.Writer, h Harness) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure npcd in-process on a temporary database (builtin model)",
	}
	// Every measurement compacts beside the ticks, as the daemon does,
	// unless told otherwise.
	background := true
	cmd.PersistentFlags().BoolVar(&background, "background-compaction", true,
		"compact beside the ticks once one leaves the context close to the emergency threshold, as the daemon does (NPCD_BACKGROUND_COMPACTION); false: every compaction a tick needs runs inside it")
	open, serve := h.Open, h.Serve
	h.Open = func(ctx context.Context, opt Options) (*World, func(), error) {
		adjust := opt.TickConfig
		opt.TickConfig = func(c *tick.Config) {
			if adjust != nil {
				adjust(c)
			}
			c.BackgroundCompaction = background
		}
		return open(ctx, opt)
	}
	if serve != nil {
		h.Serve = func(ctx context.Context, opt ServeOptions) (string, func(), error) {
			opt.Foreground = !background
			return serve(ctx, opt)
		}
	}
	var tb TickOptions
	ticks := &cobra.Command{
		Use:   "ticks",
		Short: "Tick throughput and npcd's own overhead per tick, for each NPC count",
		Long: `Ticks many NPCs in-process (each round posts one event to every NPC, then ticks them all
with concurrent workers) and reports ticks per second, npcd's overhead per tick without the
model's time (p50/p95/p99), CPU time, allocations per tick and the process's peak RSS.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return Ticks(cmd.Context(), stdout, stderr, h, tb) },
	}
	f := ticks.Flags()
	f.IntSliceVar(&tb.NPCs, "npcs", []int{1, 100}, "NPC counts to measure")
	f.IntVar(&tb.Ticks, "ticks", 2000, "ticks per measurement")
	f.IntSliceVar(&tb.History, "history", nil, "tokens of archived history each NPC holds before the run; several (1000,100000) measure a world of each, in turn, and compare their CPU per tick")
	f.IntVar(&tb.Sittings, "sittings", 1, "measure every world this many times, the worlds taking turns (with several --history, the CPU ratio is the median over the sittings)")
	f.IntVar(&tb.Others, "others", 0, "messages of other NPCs (never ticked) in the database before the run, e.g. 1000000")
	f.DurationVar(&tb.Latency, "latency", 0, "latency of each model call (a fake model in front of the builtin one), e.g. 200ms")
	f.IntVar(&tb.Workers, "workers", tick.MaxBatchWorkers, "ticks run at once")
	f.Float64Var(&tb.Rate, "rate", 0, "ticks offered per second, due at even intervals, a tick's overhead counted from when it was due (its wait for a worker or a core included); 0: as fast as the workers go")
	f.BoolVar(&tb.JSON, "json", false, "print one JSON object per measurement")
	f.StringVar(&tb.DB, "db", "", "measure on this PostgreSQL database (postgres://…), in a schema of its own dropped after; default a new SQLite file")
	f.IntVar(&tb.CacheMB, "index-cache-mb", 128, "memory the search index cache may hold, in MiB (the daemon's NPCD_INDEX_CACHE_MB)")
	f.StringVar(&tb.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run (preparation included) to this file")
	f.StringVar(&tb.MemProfile, "memprofile", "", "write a heap profile, taken after the last measured round with the worlds still open, to this file")
	f.BoolVar(&tb.Rounds, "rounds", false, "also report each measured round (one tick of every NPC): its ticks/s, overhead p50/p99, compactions, index builds and CPU per tick, and the CPU per tick by tenth of the rounds, as the world ages")
	f.BoolVar(&tb.HTTP, "http", false, "tick through the real daemon on a loopback port: a tick request per NPC carrying its event, then batch ticks of 100 NPCs carrying theirs (latencies include the model)")

	var to TokenOptions
	tokens := &cobra.Command{
		Use:   "tokens",
		Short: "Prompt tokens per tick of a long run against unbounded history and drop-the-oldest-half truncation, with planted facts",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return Tokens(cmd.Context(), stdout, stderr, h, to) },
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
		RunE:  func(cmd *cobra.Command, _ []string) error { return Budget(cmd.Context(), stdout, h) },
	}
	var messages int
	plan := &cobra.Command{
		Use:   "plan",
		Short: "Compaction planning time on a long history",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return Plan(cmd.Context(), stdout, h, messages) },
	}
	plan.Flags().IntVar(&messages, "messages", 10000, "messages in the history")
	var turns, window, obsBytes int
	masking := &cobra.Command{
		Use:   "masking",
		Short: "Prompt tokens per tick of a long run with tool observations, masking on and off",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Masking(cmd.Context(), stdout, stderr, h, turns, window, obsBytes)
		},
	}
	masking.Flags().IntVar(&turns, "turns", 1000, "turns to run")
	masking.Flags().IntVar(&window, "window", 8192, "context window of the NPC")
	masking.Flags().IntVar(&obsBytes, "observation-bytes", 2000, "size of each look observation")

	var npcs, entries, workers int
	var cpuProfile, memProfile string
	sweep := &cobra.Command{
		Use:   "sleep",
		Short: "Wall time of a sleep sweep over many NPCs (consolidation and compaction, builtin model)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return SleepSweep(cmd.Context(), stdout, h, SleepOptions{NPCs: npcs, Entries: entries, Workers: workers, CPUProfile: cpuProfile, MemProfile: memProfile})
		},
	}
	sweep.Flags().IntVar(&npcs, "npcs", 1000, "NPCs to put to sleep")
	sweep.Flags().IntVar(&entries, "entries", 20, "journal entries each NPC consolidates")
	sweep.Flags().IntVar(&workers, "workers", 8, "sleeps run at once")
	sweep.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the sweep (not of its preparation) to this file")
	sweep.Flags().StringVar(&memProfile, "memprofile", "", "write an allocation profile (preparation included) to this file after the sweep")
	var scheduled int
	var idle time.Duration
	sched := &cobra.Command{
		Use:   "schedule",
		Short: "Idle CPU and memory cost of many scheduled NPC sleeps",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return Schedule(stdout, scheduled, idle) },
	}
	sched.Flags().IntVar(&scheduled, "npcs", 10000, "NPCs with a sleep schedule")
	sched.Flags().DurationVar(&idle, "idle", 30*time.Second, "how long to watch the idle scheduler")
	cmd.AddCommand(ticks, budget, plan, masking, tokens, sweep, sched, lifeCommand(stdout, stderr, h))
	cmd.AddCommand(sayCommand(stdout, h))
	return cmd
}

func sayCommand(stdout io.Writer, h Harness) *cobra.Command {
	var b SayOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "say",
		Short: "Latency from a say event to the NPC's action on the action stream, with auto-tick",
		Long: `Runs the real daemon on a loopback port (builtin model, temporary database), registers NPCs
with auto-tick, opens GET /v1/actions/stream and has concurrent clients post a say event to one
NPC at a time; each latency runs from the event's POST to the NPC's tick arriving on the stream
(the debounce included). Reports p50/p95/p99 in milliseconds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := Say(cmd.Context(), h, b)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(stdout).Encode(m)
			}
			_, err = fmt.Fprintf(stdout, "say → action on the stream: %d NPCs, %d says, %d clients, debounce %s: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, max %.1f ms (%.0f says/s, %.2f ms CPU a say)\n",
				m.NPCs, m.Says, m.Clients, b.Debounce, m.P50MS, m.P95MS, m.P99MS, m.MaxMS, m.SaysPerS, m.CPUMSPerSay)
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&b.NPCs, "npcs", 200, "NPCs, each with auto-tick")
	f.IntVar(&b.Says, "says", 2000, "say events to measure")
	f.IntVar(&b.Clients, "clients", 20, "clients posting at once (each waits for its NPC's action before the next say)")
	f.DurationVar(&b.Debounce, "debounce", 10*time.Millisecond, "the NPCs' auto_tick.debounce_ms")
	f.DurationVar(&b.MaxWait, "max-wait", 100*time.Millisecond, "the NPCs' auto_tick.max_wait_ms")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func lifeCommand(stdout, stderr io.Writer, h Harness) *cobra.Command {
	var o LifeOptions
	cmd := &cobra.Command{
		Use:   "life",
		Short: "One innkeeper through a long life (a game-year of events and nightly sleeps), reported per tenth",
		Long: `Drives one NPC, an innkeeper with look and inventory as game tools, through a long life:
seven regulars talk, every third event asks her to look around or check her stock (the game
answers with a long observation), now and then someone tells a fact; each event is followed by
a tick, the events are spread over --nights game days (their "at" times) and she sleeps after
each day, through the same code path as a scheduled sleep or POST /v1/npcs/{npc}/sleep.
Reports per tenth of the life: ticks/s, tick latency p50/p99, CPU per tick, prompt tokens per
tick, compactions, sleeps, live and archived messages, Go heap, RSS and the index cache; then
the last tenth over the first, peak RSS and the database's size. --http drives the real daemon
on a loopback port (latencies are whole requests; CPU is daemon and client together).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return Life(cmd.Context(), stdout, stderr, h, o) },
	}
	f := cmd.Flags()
	f.IntVar(&o.Events, "events", 100000, "events of the whole life, each followed by a tick")
	f.IntVar(&o.Nights, "nights", 365, "game days the events spread over; the NPC sleeps after each")
	f.IntVar(&o.Window, "window", character.DefaultContextWindow, "context window of the NPC")
	f.IntVar(&o.ObsBytes, "observation-bytes", 1200, "size of each look or stock observation")
	f.IntVar(&o.CacheMB, "index-cache-mb", 128, "memory the search index cache may hold, in MiB (the daemon's NPCD_INDEX_CACHE_MB)")
	f.BoolVar(&o.HTTP, "http", false, "drive the real daemon on a loopback port")
	f.BoolVar(&o.JSON, "json", false, "one JSON object per tenth, then a summary object")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole life to this file")
	return cmd
}
