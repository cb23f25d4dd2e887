package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/tick"
)

// tickBench is what one run of npcd bench ticks measures.
type tickBench struct {
	npcs    []int
	ticks   int
	history int           // tokens of archived life each NPC starts with
	others  int           // messages of other, never-ticked NPCs in the database
	latency time.Duration // the fake model's latency per call
	workers int
	json    bool
	http    bool
	db      string // a PostgreSQL DSN to measure on; "" for a new SQLite file
}

func benchTicksCommand(stdout, stderr io.Writer) *cobra.Command {
	var b tickBench
	cmd := &cobra.Command{
		Use:   "ticks",
		Short: "Tick throughput and npcd's own overhead per tick, for each NPC count",
		Long: `Ticks many NPCs in-process (each round posts one event to every NPC, then ticks them all
with concurrent workers) and reports ticks per second, npcd's overhead per tick without the
model's time (p50/p95/p99), CPU time, allocations per tick and the process's peak RSS.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case b.ticks < 1:
				return fmt.Errorf("--ticks must be at least 1")
			case b.workers < 1:
				return fmt.Errorf("--workers must be at least 1")
			case b.history < 0:
				return fmt.Errorf("--history must not be negative")
			case b.others < 0:
				return fmt.Errorf("--others must not be negative")
			case b.latency < 0:
				return fmt.Errorf("--latency must not be negative")
			case len(b.npcs) == 0:
				return fmt.Errorf("--npcs needs at least one count")
			case b.db != "" && !isPostgresDSN(b.db):
				return fmt.Errorf("--db must be a PostgreSQL URL (postgres://…); without it the bench uses a new SQLite file")
			case b.http && b.db != "":
				return fmt.Errorf("--http runs the daemon as configured: it takes no --db")
			case b.http && (b.history > 0 || b.latency > 0 || b.others > 0):
				return fmt.Errorf("--http runs the daemon as configured: it takes neither --history, --others nor --latency")
			}
			for _, n := range b.npcs {
				if n < 1 {
					return fmt.Errorf("--npcs must hold counts of at least 1, not %d", n)
				}
			}
			return benchTicks(cmd.Context(), stdout, stderr, b)
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&b.npcs, "npcs", []int{1, 100}, "NPC counts to measure")
	f.IntVar(&b.ticks, "ticks", 2000, "ticks per measurement")
	f.IntVar(&b.history, "history", 0, "tokens of archived history each NPC holds before the run")
	f.IntVar(&b.others, "others", 0, "messages of other NPCs (never ticked) in the database before the run, e.g. 1000000")
	f.DurationVar(&b.latency, "latency", 0, "latency of each model call (a fake model in front of the builtin one), e.g. 200ms")
	f.IntVar(&b.workers, "workers", tick.MaxBatchWorkers, "ticks run at once")
	f.BoolVar(&b.json, "json", false, "print one JSON object per measurement")
	f.StringVar(&b.db, "db", "", "measure on this PostgreSQL database (postgres://…), in a schema of its own dropped after; default a new SQLite file")
	f.BoolVar(&b.http, "http", false, "tick through the real daemon on a loopback port: one client request per NPC tick, then batches of 100 (latencies include the model)")
	return cmd
}

// tickMeasure is one measurement, as --json prints it.
type tickMeasure struct {
	// Mode is "in-process", "http-npc" (a request per NPC tick) or
	// "http-batch" (POST /v1/tick with 100 NPCs a request).
	Mode          string  `json:"mode"`
	NPCs          int     `json:"npcs"`
	Ticks         int     `json:"ticks"`
	HistoryTokens int     `json:"history_tokens"`
	OtherMessages int     `json:"other_messages"`
	LatencyMS     float64 `json:"latency_ms"`
	TicksPerS     float64 `json:"ticks_per_s"`
	// Overhead is a tick's wall time minus the time spent in model calls
	// (over HTTP: a request's whole latency per NPC it ticked).
	P50MS float64 `json:"p50_ms"`
	P95MS float64 `json:"p95_ms"`
	P99MS float64 `json:"p99_ms"`
	// ModelMS is the mean time per tick spent in model calls.
	ModelMS           float64 `json:"model_ms"`
	CPUMSPerTick      float64 `json:"cpu_ms_per_tick"`
	AllocBytesPerTick int64   `json:"alloc_bytes_per_tick"`
	AllocsPerTick     int64   `json:"allocs_per_tick"`
	PeakRSSMiB        float64 `json:"peak_rss_mib"`
	Compactions       int     `json:"compactions"`
}

// modelTimeKey keys the per-tick accumulator of model time in a context.
type modelTimeKey struct{}

// timedModel answers with inner after a fixed latency and adds the time of
// each call to the accumulator its context carries.
type timedModel struct {
	inner   llm.Chatter
	latency time.Duration
}

func (m timedModel) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	start := time.Now()
	if m.latency > 0 {
		t := time.NewTimer(m.latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return llm.Response{}, &llm.Error{Code: llm.CodeTimeout, Err: ctx.Err()}
		}
	}
	resp, err := m.inner.Chat(ctx, req)
	if acc, ok := ctx.Value(modelTimeKey{}).(*atomic.Int64); ok {
		acc.Add(int64(time.Since(start)))
	}
	return resp, err
}

func benchTicks(ctx context.Context, out, progress io.Writer, b tickBench) error {
	if !b.json {
		dialect := "SQLite"
		if b.db != "" {
			dialect = "PostgreSQL"
		}
		fmt.Fprintf(out, "tick throughput, builtin model (latency %s), %s, %d ticks each, %d workers, %d tokens of archived history per NPC, %d messages of other NPCs\n",
			b.latency, dialect, b.ticks, b.workers, b.history, b.others)
		fmt.Fprintf(out, "  %-10s %6s %8s %9s | overhead ms p50 %6s %6s | %8s %9s %10s %8s %9s %5s\n",
			"mode", "npcs", "ticks", "ticks/s", "p95", "p99", "model ms", "cpu ms/t", "alloc B/t", "allocs/t", "peak RSS", "comp")
	}
	var runs []func() (*tickMeasure, error)
	for _, n := range b.npcs {
		if b.http {
			runs = append(runs, func() (*tickMeasure, error) { return benchHTTP(ctx, b, n, "npc") },
				func() (*tickMeasure, error) { return benchHTTP(ctx, b, n, "batch") })
			continue
		}
		runs = append(runs, func() (*tickMeasure, error) { return benchTicksOnce(ctx, progress, b, n) })
	}
	for _, run := range runs {
		m, err := run()
		if err != nil {
			return err
		}
		if b.json {
			if err := json.NewEncoder(out).Encode(m); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(out, "  %-10s %6d %8d %9.0f | %15.3f %6.3f %6.3f | %8.3f %9.3f %10d %8d %6.0f MiB %5d\n",
			m.Mode, m.NPCs, m.Ticks, m.TicksPerS, m.P50MS, m.P95MS, m.P99MS, m.ModelMS, m.CPUMSPerTick, m.AllocBytesPerTick,
			m.AllocsPerTick, m.PeakRSSMiB, m.Compactions)
	}
	return nil
}

// benchModel is the model name bench NPCs use, so that the engine asks the
// timed model in front of the builtin one.
const benchModel = "bench-builtin"

func benchTicksOnce(ctx context.Context, progress io.Writer, b tickBench, n int) (*tickMeasure, error) {
	a, done, err := benchAppOn(ctx, b.db, appOptions{
		remote:     timedModel{inner: llm.NewBuiltin(), latency: b.latency},
		tickConfig: func(c *tick.Config) { c.MaxConcurrentCalls = max(c.MaxConcurrentCalls, b.workers) },
	})
	if err != nil {
		return nil, err
	}
	defer done()
	others, err := fillOthers(ctx, progress, a, b.others)
	if err != nil {
		return nil, err
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("npc-%d", i)
		c := benchNPC(ids[i])
		c.Model = benchModel
		if _, err := a.engine.PutNPC(ctx, c); err != nil {
			return nil, err
		}
		if b.history > 0 {
			if err := fillArchive(ctx, a, ids[i], b.history); err != nil {
				return nil, err
			}
			if progress != nil && (i+1)%100 == 0 {
				fmt.Fprintf(progress, "\rhistory: %d/%d NPCs", i+1, n)
			}
		}
	}
	if progress != nil && b.history > 0 && n >= 100 {
		fmt.Fprintln(progress)
	}
	rounds := max(1, b.ticks/n)
	var overhead []time.Duration
	var modelTotal time.Duration
	var elapsed time.Duration
	compactions := 0
	var ms0, ms1 runtime.MemStats
	var cpu0 time.Duration
	// Round -1 warms up, unmeasured: the first search of an NPC loads its
	// past into memory once, which a running daemon has long done.
	for r := -1; r < rounds; r++ {
		if r == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms0)
			cpu0 = cpuTime()
			overhead, modelTotal, elapsed, compactions = overhead[:0], 0, 0, 0
		}
		for _, id := range ids {
			ev := tick.EventInput{Kind: "say", Actor: "alice", Text: fmt.Sprintf("Round %d: have you seen my sword, %s?", r, id)}
			if _, _, err := a.engine.PostEvents(ctx, id, []tick.EventInput{ev}); err != nil {
				return nil, err
			}
		}
		type one struct {
			total, model time.Duration
			res          *tick.Result
			err          error
		}
		results := make([]one, len(ids))
		work := make(chan int)
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < min(b.workers, len(ids)); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					var acc atomic.Int64
					tctx := context.WithValue(ctx, modelTimeKey{}, &acc)
					t0 := time.Now()
					res, err := a.engine.Tick(tctx, ids[i])
					results[i] = one{total: time.Since(t0), model: time.Duration(acc.Load()), res: res, err: err}
				}
			}()
		}
		for i := range ids {
			work <- i
		}
		close(work)
		wg.Wait()
		elapsed += time.Since(start)
		for i, o := range results {
			if o.err != nil {
				return nil, fmt.Errorf("tick of %s: %w", ids[i], o.err)
			}
			overhead = append(overhead, o.total-o.model)
			modelTotal += o.model
			if o.res.Compaction != nil {
				compactions++
			}
		}
	}
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&ms1)
	total := len(overhead)
	slices.Sort(overhead)
	pct := func(p float64) float64 {
		return float64(overhead[min(total-1, int(p*float64(total)))].Microseconds()) / 1000
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return &tickMeasure{
		Mode: "in-process", NPCs: n, Ticks: total, HistoryTokens: b.history, OtherMessages: others, LatencyMS: float64(b.latency.Microseconds()) / 1000,
		TicksPerS: float64(total) / elapsed.Seconds(),
		P50MS:     pct(0.50), P95MS: pct(0.95), P99MS: pct(0.99),
		ModelMS:           float64(modelTotal.Microseconds()) / 1000 / float64(total),
		CPUMSPerTick:      float64(cpu.Microseconds()) / 1000 / float64(total),
		AllocBytesPerTick: int64(ms1.TotalAlloc-ms0.TotalAlloc) / int64(total),
		AllocsPerTick:     int64(ms1.Mallocs-ms0.Mallocs) / int64(total),
		PeakRSSMiB:        float64(ru.Maxrss) / 1024, // KiB on Linux
		Compactions:       compactions,
	}, nil
}

// fillOthers writes messages of other NPCs, which the run never ticks, as
// live and archived conversation spread over up to 100 NPCs: a world whose
// other inhabitants have lived long must not slow the ones that tick.
// It returns how many messages the other NPCs hold, as stored.
func fillOthers(ctx context.Context, progress io.Writer, a *app, messages int) (int, error) {
	if messages == 0 {
		return 0, nil
	}
	counter := a.engine.Counter(benchModel)
	npcs := max(1, min(100, messages/1000))
	for k := 0; k < npcs; k++ {
		id := fmt.Sprintf("other-%d", k)
		c := benchNPC(id)
		c.Model = benchModel
		if _, err := a.engine.PutNPC(ctx, c); err != nil {
			return 0, err
		}
		left := messages / npcs
		if k < messages%npcs {
			left++
		}
		for left > 0 {
			var batch []*character.Message
			for i := 0; i < 500 && left > 0; i++ {
				role, text := llm.RoleUser, fmt.Sprintf("[2026-11-21 10:00] traveler%d says: %q", i%7, fmt.Sprintf("I came by the north road, day %d; the wolves are hungry this winter", left%97))
				if i%2 == 1 {
					role, text = llm.RoleAssistant, "Aye. Mind the bridge on your way back."
				}
				batch = append(batch, &character.Message{Role: role, Turn: 1, Content: text})
				left--
			}
			if err := a.chars.AppendMessages(ctx, id, batch, counter, 8192); err != nil {
				return 0, err
			}
			// Most of a long life is archived; the last batch stays live.
			if left > 0 {
				msgIDs := make([]int64, len(batch))
				for i, m := range batch {
					msgIDs[i] = m.ID
				}
				if err := a.chars.Archive(ctx, id, msgIDs, nil); err != nil {
					return 0, err
				}
			}
		}
		if progress != nil && npcs >= 10 {
			fmt.Fprintf(progress, "\rother NPCs: %d/%d", k+1, npcs)
		}
	}
	if progress != nil && npcs >= 10 {
		fmt.Fprintln(progress)
	}
	stored := 0
	for k := 0; k < npcs; k++ {
		live, archived, err := a.chars.CountMessages(ctx, fmt.Sprintf("other-%d", k))
		if err != nil {
			return 0, err
		}
		stored += live + archived
	}
	return stored, nil
}

// fillArchive gives NPC id an archived past of about tokens tokens: plain
// conversation, written and archived without a model, as if compacted long
// ago. The live history stays as it was.
func fillArchive(ctx context.Context, a *app, id string, tokens int) error {
	counter := a.engine.Counter(benchModel)
	total := 0
	for total < tokens {
		var batch []*character.Message
		for i := 0; i < 100 && total < tokens; i++ {
			u := &character.Message{Role: llm.RoleUser, Turn: 1, Content: fmt.Sprintf("[2026-11-21 10:00] traveler%d says: %q", i%7,
				fmt.Sprintf("I came by the north road, day %d; %s", total%97, strings.Repeat("the wolves are hungry this winter and ", 2)))}
			r := &character.Message{Role: llm.RoleAssistant, Turn: 1, Content: "Aye. Mind the bridge on your way back."}
			batch = append(batch, u, r)
			total += counter.Message(u.Full()) + counter.Message(r.Full())
		}
		if err := a.chars.AppendMessages(ctx, id, batch, counter, 8192); err != nil {
			return err
		}
		ids := make([]int64, len(batch))
		for i, m := range batch {
			ids[i] = m.ID
		}
		if err := a.chars.Archive(ctx, id, ids, nil); err != nil {
			return err
		}
	}
	return nil
}
