package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/tick"
)

// TickOptions are what one run of Ticks measures.
type TickOptions struct {
	NPCs    []int         // NPC counts, one measurement each
	Ticks   int           // ticks per measurement
	History int           // tokens of archived life each NPC starts with
	Others  int           // messages of other, never-ticked NPCs in the database
	Latency time.Duration // the fake model's latency per call
	Workers int           // ticks run at once
	JSON    bool          // one JSON object per measurement
	HTTP    bool          // through the daemon on a loopback port
	DB      string        // a PostgreSQL URL to measure on; empty for a new SQLite file
	CacheMB int           // bound of the memory search's index cache, MiB (NPCD_INDEX_CACHE_MB)
	// CPUProfile, when set, names a file for a CPU profile of the whole
	// run, preparation included.
	CPUProfile string
}

// Check refuses bad options, naming the flag of npcd bench ticks.
func (b TickOptions) Check() error {
	switch {
	case b.Ticks < 1:
		return fmt.Errorf("--ticks must be at least 1")
	case b.Workers < 1:
		return fmt.Errorf("--workers must be at least 1")
	case b.History < 0:
		return fmt.Errorf("--history must not be negative")
	case b.Others < 0:
		return fmt.Errorf("--others must not be negative")
	case b.Latency < 0:
		return fmt.Errorf("--latency must not be negative")
	case b.CacheMB < 1 || b.CacheMB > 1<<20:
		return fmt.Errorf("--index-cache-mb must be between 1 and %d", 1<<20)
	case len(b.NPCs) == 0:
		return fmt.Errorf("--npcs needs at least one count")
	case b.DB != "" && !strings.HasPrefix(b.DB, "postgres://") && !strings.HasPrefix(b.DB, "postgresql://"):
		return fmt.Errorf("--db must be a PostgreSQL URL (postgres://…); without it the bench uses a new SQLite file")
	case b.HTTP && b.DB != "":
		return fmt.Errorf("--http runs the daemon as configured: it takes no --db")
	case b.HTTP && (b.History > 0 || b.Latency > 0 || b.Others > 0):
		return fmt.Errorf("--http runs the daemon as configured: it takes neither --history, --others nor --latency")
	}
	for _, n := range b.NPCs {
		if n < 1 {
			return fmt.Errorf("--npcs must hold counts of at least 1, not %d", n)
		}
	}
	return nil
}

// TickMeasure is one measurement, as --json prints it.
type TickMeasure struct {
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
	// IndexBuilds counts the search indexes built during the measured
	// ticks (in-process only): an NPC's index dropped to keep the cache
	// within --index-cache-mb and built again from the database. Each
	// first build is done before the measurement.
	IndexBuilds int64 `json:"index_builds"`
}

// modelTimeKey keys the per-tick accumulator of model time in a context.
type modelTimeKey struct{}

// timedModel answers with inner after a fixed latency and adds the time of
// each call to the accumulator its context carries.
type timedModel struct {
	inner   llm.Chatter
	latency time.Duration
}

// lendingTimedModel is a timedModel whose inner model keeps nothing of a
// request's messages (llm.MessagesBorrower); neither does the timing.
type lendingTimedModel struct{ timedModel }

func (lendingTimedModel) BorrowsMessages() {}

// newTimedModel returns inner behind a fixed latency, a MessagesBorrower
// when inner is one.
func newTimedModel(inner llm.Chatter, latency time.Duration) llm.Chatter {
	m := timedModel{inner: inner, latency: latency}
	if _, ok := inner.(llm.MessagesBorrower); ok {
		return lendingTimedModel{m}
	}
	return m
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

// Ticks ticks many NPCs (each round posts one event to every NPC, then
// ticks them all with concurrent workers) and reports ticks per second,
// npcd's overhead per tick without the model's time (p50/p95/p99), CPU
// time, allocations per tick and the process's peak RSS, for each NPC
// count; with b.HTTP, through the daemon, per NPC and in batches.
func Ticks(ctx context.Context, out, progress io.Writer, h Harness, b TickOptions) error {
	if err := b.Check(); err != nil {
		return err
	}
	if !b.JSON {
		dialect := "SQLite"
		if b.DB != "" {
			dialect = "PostgreSQL"
		}
		fmt.Fprintf(out, "tick throughput, builtin model (latency %s), %s, %d ticks each, %d workers, %d tokens of archived history per NPC, %d messages of other NPCs\n",
			b.Latency, dialect, b.Ticks, b.Workers, b.History, b.Others)
		fmt.Fprintf(out, "  %-10s %6s %8s %9s | overhead ms p50 %6s %6s | %8s %9s %10s %8s %9s %5s\n",
			"mode", "npcs", "ticks", "ticks/s", "p95", "p99", "model ms", "cpu ms/t", "alloc B/t", "allocs/t", "peak RSS", "comp")
	}
	stopProfile, err := startCPUProfile(b.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	var runs []func() (*TickMeasure, error)
	for _, n := range b.NPCs {
		if b.HTTP {
			runs = append(runs, func() (*TickMeasure, error) { return benchHTTP(ctx, h, b, n, "npc") },
				func() (*TickMeasure, error) { return benchHTTP(ctx, h, b, n, "batch") })
			continue
		}
		runs = append(runs, func() (*TickMeasure, error) { return benchTicksOnce(ctx, progress, h, b, n) })
	}
	for _, run := range runs {
		m, err := run()
		if err != nil {
			return err
		}
		if b.JSON {
			if err := json.NewEncoder(out).Encode(m); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(out, "  %-10s %6d %8d %9.0f | %15.3f %6.3f %6.3f | %8.3f %9.3f %10d %8d %6.0f MiB %5d\n",
			m.Mode, m.NPCs, m.Ticks, m.TicksPerS, m.P50MS, m.P95MS, m.P99MS, m.ModelMS, m.CPUMSPerTick, m.AllocBytesPerTick,
			m.AllocsPerTick, m.PeakRSSMiB, m.Compactions)
		if m.IndexBuilds > 0 {
			fmt.Fprintf(out, "  %-10s %d search indexes were built again during the ticks: the index cache (--index-cache-mb %d) is too small for these NPCs\n",
				"", m.IndexBuilds, b.CacheMB)
		}
	}
	return nil
}

// benchModel is the model name bench NPCs use, so that the engine asks the
// timed model in front of the builtin one.
const benchModel = "bench-builtin"

func benchTicksOnce(ctx context.Context, progress io.Writer, h Harness, b TickOptions, n int) (*TickMeasure, error) {
	a, done, err := h.Open(ctx, Options{
		DB:           b.DB,
		IndexCacheMB: b.CacheMB,
		Remote:       newTimedModel(llm.NewBuiltin(), b.Latency),
		TickConfig:   func(c *tick.Config) { c.MaxConcurrentCalls = max(c.MaxConcurrentCalls, b.Workers) },
	})
	if err != nil {
		return nil, err
	}
	defer done()
	// The setup and the warm-up round carry the profile label bench=setup,
	// so that a CPU profile of the measured ticks alone is
	// go tool pprof -tagignore bench=setup.
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("bench", "setup")))
	defer pprof.SetGoroutineLabels(ctx)
	others, err := fillOthers(ctx, progress, a, b.Others)
	if err != nil {
		return nil, err
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("npc-%d", i)
		c := benchNPC(ids[i])
		c.Model = benchModel
		if _, err := a.Engine.PutNPC(ctx, c); err != nil {
			return nil, err
		}
		if b.History > 0 {
			if err := fillArchive(ctx, a, ids[i], b.History); err != nil {
				return nil, err
			}
			if progress != nil && (i+1)%100 == 0 {
				fmt.Fprintf(progress, "\rhistory: %d/%d NPCs", i+1, n)
			}
		}
	}
	if progress != nil && b.History > 0 && n >= 100 {
		fmt.Fprintln(progress)
	}
	rounds := max(1, b.Ticks/n)
	var overhead []time.Duration
	var modelTotal time.Duration
	var elapsed time.Duration
	compactions := 0
	var ms0, ms1 runtime.MemStats
	var cpu0 time.Duration
	var builds0 int64
	// Round -1 warms up, unmeasured: the first search of an NPC loads its
	// past into memory once, which a running daemon has long done.
	for r := -1; r < rounds; r++ {
		if r == 0 {
			pprof.SetGoroutineLabels(ctx)
			runtime.GC()
			runtime.ReadMemStats(&ms0)
			cpu0 = cpuTime()
			builds0 = a.Retriever.CacheStats().Builds
			overhead, modelTotal, elapsed, compactions = overhead[:0], 0, 0, 0
		}
		for _, id := range ids {
			ev := tick.EventInput{Kind: "say", Actor: "alice", Text: fmt.Sprintf("Round %d: have you seen my sword, %s?", r, id)}
			if _, _, err := a.Engine.PostEvents(ctx, id, []tick.EventInput{ev}); err != nil {
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
		for w := 0; w < min(b.Workers, len(ids)); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					var acc atomic.Int64
					tctx := context.WithValue(ctx, modelTimeKey{}, &acc)
					t0 := time.Now()
					res, err := a.Engine.Tick(tctx, ids[i])
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
	builds := a.Retriever.CacheStats().Builds - builds0
	runtime.ReadMemStats(&ms1)
	total := len(overhead)
	slices.Sort(overhead)
	pct := func(p float64) float64 {
		return float64(overhead[min(total-1, int(p*float64(total)))].Microseconds()) / 1000
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return &TickMeasure{
		Mode: "in-process", NPCs: n, Ticks: total, HistoryTokens: b.History, OtherMessages: others, LatencyMS: float64(b.Latency.Microseconds()) / 1000,
		TicksPerS: float64(total) / elapsed.Seconds(),
		P50MS:     pct(0.50), P95MS: pct(0.95), P99MS: pct(0.99),
		ModelMS:           float64(modelTotal.Microseconds()) / 1000 / float64(total),
		CPUMSPerTick:      float64(cpu.Microseconds()) / 1000 / float64(total),
		AllocBytesPerTick: int64(ms1.TotalAlloc-ms0.TotalAlloc) / int64(total),
		AllocsPerTick:     int64(ms1.Mallocs-ms0.Mallocs) / int64(total),
		PeakRSSMiB:        float64(ru.Maxrss) / 1024, // KiB on Linux
		Compactions:       compactions,
		IndexBuilds:       builds,
	}, nil
}

// fillOthers writes messages of other NPCs, which the run never ticks, as
// live and archived conversation spread over up to 100 NPCs: a world whose
// other inhabitants have lived long must not slow the ones that tick.
// It returns how many messages the other NPCs hold, as stored.
func fillOthers(ctx context.Context, progress io.Writer, a *World, messages int) (int, error) {
	if messages == 0 {
		return 0, nil
	}
	counter := a.Engine.Counter(benchModel)
	npcs := max(1, min(100, messages/1000))
	for k := 0; k < npcs; k++ {
		id := fmt.Sprintf("other-%d", k)
		c := benchNPC(id)
		c.Model = benchModel
		if _, err := a.Engine.PutNPC(ctx, c); err != nil {
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
			if err := a.Chars.AppendMessages(ctx, id, batch, counter, 8192); err != nil {
				return 0, err
			}
			// Most of a long life is archived; the last batch stays live.
			if left > 0 {
				msgIDs := make([]int64, len(batch))
				for i, m := range batch {
					msgIDs[i] = m.ID
				}
				if err := a.Chars.Archive(ctx, id, msgIDs, nil); err != nil {
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
		live, archived, err := a.Chars.CountMessages(ctx, fmt.Sprintf("other-%d", k))
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
func fillArchive(ctx context.Context, a *World, id string, tokens int) error {
	counter := a.Engine.Counter(benchModel)
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
		if err := a.Chars.AppendMessages(ctx, id, batch, counter, 8192); err != nil {
			return err
		}
		ids := make([]int64, len(batch))
		for i, m := range batch {
			ids[i] = m.ID
		}
		if err := a.Chars.Archive(ctx, id, ids, nil); err != nil {
			return err
		}
	}
	return nil
}
