package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tick"
)

// TickOptions are what one run of Ticks measures.
type TickOptions struct {
	NPCs  []int // NPC counts, one measurement each
	Ticks int   // ticks per measurement
	// History lists the tokens of archived life each NPC starts with, one
	// world (and measurement) each; nil is one world of young NPCs.
	History []int
	// Sittings repeats the measurements of each NPC count, the worlds of
	// every History taking turns, each prepared once; with more than one
	// History, the CPU per tick of each is compared with the first's,
	// sitting by sitting (TickRatio). 0 counts as 1.
	Sittings int
	Others   int           // messages of other, never-ticked NPCs in the database
	Latency  time.Duration // the fake model's latency per call
	Workers  int           // ticks run at once
	// Rate is the ticks offered per second (in-process): each round's
	// ticks are due at even intervals from its start, and a tick's
	// overhead counts from when it was due, so a tick that waited for a
	// worker, or for a busy machine, counts its wait (Workers bounds the
	// ticks in flight). 0 ticks as fast as the workers go, which measures
	// the throughput and the latency of a saturated machine.
	Rate    float64
	JSON    bool   // one JSON object per measurement
	HTTP    bool   // through the daemon on a loopback port
	DB      string // a PostgreSQL URL to measure on; empty for a new SQLite file
	CacheMB int    // bound of the memory search's index cache, MiB (NPCD_INDEX_CACHE_MB)
	// CPUProfile, when set, names a file for a CPU profile of the whole
	// run, preparation included.
	CPUProfile string
	// MemProfile, when set, names a file for a heap profile taken after
	// the last measured round, while the worlds are still open (with
	// several --npcs, of the last count).
	MemProfile string
	// Rounds also reports each measured round (TickMeasure.Rounds), to
	// tell a tail made in a few rounds (a burst of compactions, of index
	// builds) from one spread over the run. In-process only.
	Rounds bool
}

// Check refuses bad options, naming the flag of npcd bench ticks.
func (b TickOptions) Check() error {
	switch {
	case b.Ticks < 1:
		return fmt.Errorf("--ticks must be at least 1")
	case b.Workers < 1:
		return fmt.Errorf("--workers must be at least 1")
	case b.Rate < 0 || b.Rate > 1e6:
		return fmt.Errorf("--rate must be between 0 and 1000000 ticks a second")
	case b.HTTP && b.Rate > 0:
		return fmt.Errorf("--rate paces the in-process ticks: it takes no --http")
	case slices.ContainsFunc(b.History, func(h int) bool { return h < 0 }):
		return fmt.Errorf("--history must not be negative")
	case b.Sittings < 0 || b.Sittings > 1000:
		return fmt.Errorf("--sittings must be between 1 and 1000")
	case b.HTTP && b.Sittings > 1:
		return fmt.Errorf("--http runs the daemon as configured: it takes no --sittings")
	case b.HTTP && b.Rounds:
		return fmt.Errorf("--rounds reports the rounds of the in-process worlds: it takes no --http")
	case b.HTTP && b.MemProfile != "":
		return fmt.Errorf("--memprofile profiles the in-process worlds: it takes no --http")
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
	case b.HTTP && (slices.ContainsFunc(b.History, func(h int) bool { return h > 0 }) || b.Latency > 0 || b.Others > 0):
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
	// "http-batch" (POST /v1/tick with 100 NPCs and their events a
	// request).
	Mode string `json:"mode"`
	NPCs int    `json:"npcs"`
	// Sitting numbers the measurement's sitting (--sittings), from 1.
	Sitting       int     `json:"sitting"`
	Ticks         int     `json:"ticks"`
	HistoryTokens int     `json:"history_tokens"`
	OtherMessages int     `json:"other_messages"`
	LatencyMS     float64 `json:"latency_ms"`
	// RatePerS is the ticks offered per second (--rate); 0 when the
	// workers ticked as fast as they went.
	RatePerS  float64 `json:"rate_per_s,omitempty"`
	TicksPerS float64 `json:"ticks_per_s"`
	// Overhead is a tick's wall time minus the time spent in model calls
	// (over HTTP: a request's whole latency per NPC it ticked).
	P50MS float64 `json:"p50_ms"`
	P95MS float64 `json:"p95_ms"`
	P99MS float64 `json:"p99_ms"`
	// LatencyP99MS is the 99th percentile of a tick's whole wall time,
	// model calls included: what the game waits for (in-process only).
	LatencyP99MS float64 `json:"latency_p99_ms,omitempty"`
	// ModelMS is the mean time per tick spent in model calls.
	ModelMS           float64 `json:"model_ms"`
	CPUMSPerTick      float64 `json:"cpu_ms_per_tick"`
	AllocBytesPerTick int64   `json:"alloc_bytes_per_tick"`
	AllocsPerTick     int64   `json:"allocs_per_tick"`
	PeakRSSMiB        float64 `json:"peak_rss_mib"`
	Compactions       int     `json:"compactions"`
	// BackgroundCompactions ran beside the measured ticks (in-process
	// only); Compactions ran inside them.
	BackgroundCompactions int `json:"background_compactions"`
	// IndexBuilds counts the search indexes built during the measured
	// ticks (in-process only): an NPC's index dropped to keep the cache
	// within --index-cache-mb and built again from the database. Each
	// first build is done before the measurement.
	IndexBuilds int64 `json:"index_builds"`
	// RowReadsPerTick is how many messages and journal entries the measured
	// ticks' searches read from the database, their index not keeping them,
	// per tick (in-process only): near 0 while --index-cache-mb keeps what
	// the searches show, rising once the cache, over its budget, cuts it.
	RowReadsPerTick float64 `json:"row_reads_per_tick"`
	// WriterBusy is the share of the measured time SQLite's single writer
	// was held (by the ticks' commits, the compactions beside them and the
	// checkpoints): near 1, the ticks queue for it (in-process on SQLite
	// only; 0 otherwise).
	WriterBusy float64 `json:"writer_busy"`
	// CoresBusy is the share of the cores (GOMAXPROCS) the process kept
	// busy while the measured ticks ran, the posting of their events left
	// out (in-process only): well below 1 while the writer is near 1, the
	// ticks wait for SQLite's one writer, not for a core.
	CoresBusy float64 `json:"cores_busy"`
	// Rounds lists the measured rounds, in order (--rounds only).
	Rounds []TickRound `json:"rounds,omitempty"`
	// Aging is how the CPU a tick costs changed as the world aged over the
	// rounds (--rounds only, with at least ten rounds).
	Aging *TickAging `json:"aging,omitempty"`
}

// TickAging sums up the measured rounds of a world by tenths of the run:
// the process's CPU time per tick in each tenth, the compactions beside
// the ticks and the index builds included, as the world ages. A world
// whose NPCs still grow toward the bounds of a tick's work (the search's
// recall window, the compaction threshold) gets dearer from tenth to
// tenth; one whose cost stays flat once they are reached shows it in the
// last tenths.
type TickAging struct {
	// CPUMSPerTick holds the ten tenths' CPU milliseconds per tick, the
	// first rounds first.
	CPUMSPerTick []float64 `json:"cpu_ms_per_tick"`
	// LastOverFirst is the last tenth's CPU per tick over the first's;
	// LastOverPrevious, over the tenth before it.
	LastOverFirst    float64 `json:"last_over_first"`
	LastOverPrevious float64 `json:"last_over_previous"`
}

// agingOf sums up rounds by tenths, nil for fewer than ten rounds.
func agingOf(rounds []TickRound) *TickAging {
	if len(rounds) < 10 {
		return nil
	}
	a := &TickAging{CPUMSPerTick: make([]float64, 10)}
	for t := range 10 {
		var cpu float64
		var ticks int
		for _, r := range rounds[t*len(rounds)/10 : (t+1)*len(rounds)/10] {
			cpu += r.CPUMS
			ticks += r.Ticks
		}
		a.CPUMSPerTick[t] = cpu / float64(max(1, ticks))
	}
	if c := a.CPUMSPerTick; c[0] > 0 && c[8] > 0 {
		a.LastOverFirst, a.LastOverPrevious = c[9]/c[0], c[9]/c[8]
	}
	return a
}

// TickRound is one measured round of a world: one tick of every NPC.
type TickRound struct {
	Round     int     `json:"round"` // from 1, the first measured
	MS        float64 `json:"ms"`    // the round's wall time
	Ticks     int     `json:"ticks"`
	TicksPerS float64 `json:"ticks_per_s"`
	// CPUMS is the process's CPU time during the round, in milliseconds:
	// its ticks, and whatever ran beside them (compactions, checkpoints,
	// the garbage collector).
	CPUMS float64 `json:"cpu_ms"`
	// P50MS and P99MS are the round's percentiles of npcd's overhead per
	// tick, as TickMeasure's.
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	// Compactions ran inside the round's ticks; BackgroundCompactions
	// beside them, counted in the round a tick found them landed.
	Compactions           int   `json:"compactions"`
	BackgroundCompactions int   `json:"background_compactions"`
	IndexBuilds           int64 `json:"index_builds"`
	// RowReads counts the rows the round's searches read from the
	// database (TickMeasure.RowReadsPerTick).
	RowReads int64 `json:"row_reads"`
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

// PromptCounter is inner's counter when the model has no latency and inner
// counts its prompts (the builtin model): it then stands for a daemon's
// builtin model, to which the engine passes its count of each prompt, not
// for an endpoint, which reports its own usage (see llm.PromptCounter).
func (m timedModel) PromptCounter() *llm.Counter {
	if pc, ok := m.inner.(llm.PromptCounter); ok && m.latency == 0 {
		return pc.PromptCounter()
	}
	return nil
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
	histories := b.History
	if len(histories) == 0 {
		histories = []int{0}
	}
	sittings := max(1, b.Sittings)
	// The mode column names the history and the sitting when there are
	// several.
	width := 10
	if len(histories) > 1 || sittings > 1 {
		width = 20
	}
	if !b.JSON {
		dialect := "SQLite"
		if b.DB != "" {
			dialect = "PostgreSQL"
		}
		fmt.Fprintf(out, "tick throughput, builtin model (latency %s), %s, %d ticks each, %d workers, %s tokens of archived history per NPC, %d messages of other NPCs\n",
			b.Latency, dialect, b.Ticks, b.Workers, joinInts(histories, " or "), b.Others)
		if b.Rate > 0 {
			fmt.Fprintf(out, "  %g ticks a second offered: each round's ticks are due at even intervals, and a tick's overhead counts from when it was due\n", b.Rate)
		}
		fmt.Fprintf(out, "  %-*s %6s %8s %9s | overhead ms p50 %6s %6s | %8s %8s %9s %10s %8s %9s %5s %6s %6s %5s\n",
			width, "mode", "npcs", "ticks", "ticks/s", "p95", "p99", "model ms", "tick p99", "cpu ms/t", "alloc B/t", "allocs/t", "peak RSS", "comp", "b-comp", "writer", "busy")
	}
	stopProfile, err := startCPUProfile(b.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	// The heap profile is written once the rounds are measured: a path
	// that cannot be written is refused before them.
	if err := writeMemProfile(b.MemProfile, "heap"); err != nil {
		return err
	}
	report := func(m *TickMeasure) error {
		if b.JSON {
			return json.NewEncoder(out).Encode(m)
		}
		label := m.Mode
		if len(histories) > 1 {
			label = fmt.Sprintf("%s %s", m.Mode, historyLabel(m.HistoryTokens))
		}
		if sittings > 1 {
			label = fmt.Sprintf("%s #%d", label, m.Sitting)
		}
		writer, busy := "-", "-"
		if m.WriterBusy > 0 {
			writer = fmt.Sprintf("%.0f%%", 100*m.WriterBusy)
		}
		if m.CoresBusy > 0 {
			busy = fmt.Sprintf("%.0f%%", 100*m.CoresBusy)
		}
		fmt.Fprintf(out, "  %-*s %6d %8d %9.0f | %15.3f %6.3f %6.3f | %8.3f %8.1f %9.3f %10d %8d %6.0f MiB %5d %6d %6s %5s\n",
			width, label, m.NPCs, m.Ticks, m.TicksPerS, m.P50MS, m.P95MS, m.P99MS, m.ModelMS, m.LatencyP99MS, m.CPUMSPerTick, m.AllocBytesPerTick,
			m.AllocsPerTick, m.PeakRSSMiB, m.Compactions, m.BackgroundCompactions, writer, busy)
		if m.IndexBuilds > 0 {
			fmt.Fprintf(out, "  %-*s %d search indexes were built again during the ticks: the index cache (--index-cache-mb %d) is too small for these NPCs\n",
				width, "", m.IndexBuilds, b.CacheMB)
		}
		for _, r := range m.Rounds {
			fmt.Fprintf(out, "  %-*s %6s %8s %9.0f | %15.3f %13.3f | round's comp %d, b-comp %d, index builds %d, row reads %d, cpu ms/t %.3f\n",
				width, "round", fmt.Sprintf("#%d", r.Round), fmt.Sprintf("%.0f ms", r.MS), r.TicksPerS, r.P50MS, r.P99MS, r.Compactions, r.BackgroundCompactions, r.IndexBuilds,
				r.RowReads, r.CPUMS/float64(max(1, r.Ticks)))
		}
		if a := m.Aging; a != nil {
			tenths := make([]string, len(a.CPUMSPerTick))
			for i, c := range a.CPUMSPerTick {
				tenths[i] = fmt.Sprintf("%.3f", c)
			}
			fmt.Fprintf(out, "  %-*s cpu ms per tick by tenth of the rounds: %s; the last tenth over the first %.2f×, over the one before it %.2f×\n",
				width, "aging", strings.Join(tenths, " "), a.LastOverFirst, a.LastOverPrevious)
		}
		return nil
	}
	for _, n := range b.NPCs {
		if b.HTTP {
			for _, mode := range []string{"npc", "batch"} {
				m, err := benchHTTP(ctx, h, b, n, mode)
				if err != nil {
					return err
				}
				m.Sitting = 1
				if err := report(m); err != nil {
					return err
				}
			}
			continue
		}
		if err := benchTickWorlds(ctx, out, progress, h, b, n, histories, sittings, report); err != nil {
			return err
		}
	}
	return nil
}

// TickRatio compares, for one NPC count, the CPU per tick of NPCs with a
// long archived life with that of NPCs with the first --history, sitting
// by sitting: the worlds tick in turn, round by round, in one process, so
// a machine busier at one moment than another weighs on both sides of a
// ratio.
// --json prints it after the measurements it sums up.
type TickRatio struct {
	Compare              string  `json:"compare"` // "cpu_ms_per_tick"
	NPCs                 int     `json:"npcs"`
	HistoryTokens        int     `json:"history_tokens"`
	AgainstHistoryTokens int     `json:"against_history_tokens"`
	Sittings             int     `json:"sittings"`
	Median               float64 `json:"ratio_median"`
	Min                  float64 `json:"ratio_min"`
	Max                  float64 `json:"ratio_max"`
}

// tickRatios returns, for each history after the first, its CPU per tick
// over the first's: cpu[s][i] is sitting s's measurement of history i. A
// sitting with either side not measured (0) has no ratio.
func tickRatios(n int, histories []int, cpu [][]float64) []TickRatio {
	var out []TickRatio
	for i := 1; i < len(histories); i++ {
		var rs []float64
		for _, sit := range cpu {
			if sit[0] > 0 && sit[i] > 0 {
				rs = append(rs, sit[i]/sit[0])
			}
		}
		if len(rs) == 0 {
			continue
		}
		slices.Sort(rs)
		med := rs[len(rs)/2]
		if len(rs)%2 == 0 {
			med = (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
		}
		out = append(out, TickRatio{Compare: "cpu_ms_per_tick", NPCs: n, HistoryTokens: histories[i], AgainstHistoryTokens: histories[0],
			Sittings: len(rs), Median: med, Min: rs[0], Max: rs[len(rs)-1]})
	}
	return out
}

// benchTickWorlds prepares a world of n NPCs for each history, then
// measures them in turn, sittings times, and compares their CPU per tick.
func benchTickWorlds(ctx context.Context, out, progress io.Writer, h Harness, b TickOptions, n int, histories []int, sittings int, report func(*TickMeasure) error) error {
	worlds := make([]*tickWorld, 0, len(histories))
	defer func() {
		for _, w := range worlds {
			w.done()
		}
	}()
	for _, hist := range histories {
		w, err := prepareTicks(ctx, progress, h, b, n, hist)
		if err != nil {
			return err
		}
		if len(b.History) > 0 {
			w.historyLabel = strconv.Itoa(hist)
		}
		worlds = append(worlds, w)
	}
	// The worlds tick in turn round by round, each round measured on its
	// own, so that whatever else the machine does in a sitting weighs on
	// every world alike.
	rounds := max(1, b.Ticks/n)
	cpu := make([][]float64, sittings)
	for s := range cpu {
		runtime.GC()
		accs := make([]tickAcc, len(worlds))
		for i := range accs {
			accs[i].perRound = b.Rounds
		}
		for range rounds {
			for i, w := range worlds {
				if err := w.measureRound(ctx, b.Workers, b.Rate, &accs[i]); err != nil {
					return err
				}
			}
		}
		if s == sittings-1 {
			if err := writeMemProfile(b.MemProfile, "heap"); err != nil {
				return err
			}
		}
		cpu[s] = make([]float64, len(worlds))
		for i, w := range worlds {
			m := w.measurement(b, &accs[i])
			m.Sitting = s + 1
			cpu[s][i] = m.CPUMSPerTick
			if err := report(m); err != nil {
				return err
			}
		}
	}
	for _, r := range tickRatios(n, histories, cpu) {
		if b.JSON {
			if err := json.NewEncoder(out).Encode(r); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(out, "  %d NPCs: CPU per tick with %s tokens of history over %s: %.2f (median of %d sittings, %.2f–%.2f)\n",
			n, historyLabel(r.HistoryTokens), historyLabel(r.AgainstHistoryTokens), r.Median, r.Sittings, r.Min, r.Max)
	}
	return nil
}

// historyLabel names a history size in the table: 1000 is "1k".
func historyLabel(tokens int) string {
	if tokens >= 1000 && tokens%1000 == 0 {
		return fmt.Sprintf("%dk", tokens/1000)
	}
	return fmt.Sprint(tokens)
}

func joinInts(xs []int, sep string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, sep)
}

// benchModel is the model name bench NPCs use, so that the engine asks the
// timed model in front of the builtin one.
const benchModel = "bench-builtin"

// tickWorld is a prepared world of bench NPCs: a database, their archived
// history, every search index built.
type tickWorld struct {
	a       *World
	done    func()
	ids     []string
	history int
	// historyLabel is history as the profile label of its ticks, set for
	// the worlds of a --history comparison, 0 tokens included (see
	// roundLabels).
	historyLabel string
	others       int
	next         int // the next round's number, for the events' text
	// comps is each NPC's count of compactions as its last tick gave it
	// (-1 before), beside the number of compactions run beside the ticks
	// so far, which no tick reports: what an NPC's count gained between
	// two ticks beyond the second's own.
	comps  []int
	beside int
}

// tickConfig sets the engine of a tick world: room for every worker's
// model call and, for a model that waits (--latency) as an endpoint does,
// the bound on background compactions the daemon gives an endpoint.
func (b TickOptions) tickConfig(c *tick.Config) {
	c.MaxConcurrentCalls = max(c.MaxConcurrentCalls, b.Workers)
	if b.Latency > 0 {
		c.BackgroundCompactions = c.MaxConcurrentCalls
	}
}

// prepareTicks opens a world of n NPCs with history tokens of archived
// life each (and b.Others messages of other NPCs) and runs its warm-up
// rounds (warmRounds), unmeasured.
func prepareTicks(ctx context.Context, progress io.Writer, h Harness, b TickOptions, n, history int) (*tickWorld, error) {
	a, done, err := h.Open(ctx, Options{
		DB:           b.DB,
		IndexCacheMB: b.CacheMB,
		Remote:       newTimedModel(llm.NewBuiltin(), b.Latency),
		TickConfig:   b.tickConfig,
	})
	if err != nil {
		return nil, err
	}
	w := &tickWorld{a: a, done: done, history: history}
	if err := w.fill(ctx, progress, b, n); err != nil {
		done()
		return nil, err
	}
	return w, nil
}

// fill writes the world's NPCs and their past and warms them up. It and
// the warm-up rounds carry the profile label bench=setup, so that a CPU
// profile of the measured ticks alone is go tool pprof -tagignore
// bench=setup.
func (w *tickWorld) fill(ctx context.Context, progress io.Writer, b TickOptions, n int) error {
	defer pprof.SetGoroutineLabels(ctx)
	ctx = pprof.WithLabels(ctx, pprof.Labels("bench", "setup"))
	pprof.SetGoroutineLabels(ctx)
	a := w.a
	others, err := fillOthers(ctx, progress, a, b.Others)
	if err != nil {
		return err
	}
	w.others = others
	w.ids = make([]string, n)
	for i := range w.ids {
		w.ids[i] = fmt.Sprintf("npc-%d", i)
		c := benchNPC(w.ids[i])
		c.Model = benchModel
		if _, err := a.Engine.PutNPC(ctx, c); err != nil {
			return err
		}
		if w.history > 0 {
			if err := fillArchive(ctx, a, w.ids[i], w.history); err != nil {
				return err
			}
			if progress != nil && (i+1)%100 == 0 {
				fmt.Fprintf(progress, "\rhistory: %d/%d NPCs", i+1, n)
			}
		}
	}
	if progress != nil && w.history > 0 && n >= 100 {
		fmt.Fprintln(progress)
	}
	for range warmRounds {
		if _, _, err := w.round(ctx, b.Workers, 0); err != nil {
			return err
		}
	}
	return nil
}

// warmRounds are the rounds of ticks a world runs before it is measured:
// the first search of an NPC loads its past into memory, and the next few
// fill its cache of the rows searches show, which a running daemon has
// long done.
const warmRounds = 5

// tickOutcome is one tick of a round: its wall time, the part of it spent
// in the model, and its result or error.
type tickOutcome struct {
	total, model time.Duration
	res          *tick.Result
	err          error
}

// roundTime is how long a round's ticking took, how long SQLite's writer
// was held meanwhile and the process's CPU time meanwhile: all without the
// posting of its events.
type roundTime struct {
	took, writerHeld, cpu time.Duration
}

// round posts one event to every NPC of w, then ticks them all with
// workers concurrent workers (at rate, when not 0: TickOptions.Rate), and
// returns the ticks in NPC order and the time the ticking took. The ticks
// carry the profile label round=N, N as --rounds numbers the rounds of
// one sitting (from 1, the first measured; the warm-up rounds before it
// are 0 and below), as do the compactions they begin beside them, so
// that a CPU profile can be cut by round (go tool pprof -tagfocus
// 'round=^60$': a label that reads as a number is otherwise taken for a
// range).
func (w *tickWorld) round(ctx context.Context, workers int, rate float64) ([]tickOutcome, roundTime, error) {
	r := w.next
	w.next++
	ctx = roundLabels(ctx, r, w.historyLabel)
	for _, id := range w.ids {
		ev := tick.EventInput{Kind: "say", Actor: "alice", Text: fmt.Sprintf("Round %d: have you seen my sword, %s?", r, id)}
		if _, _, err := w.a.Engine.PostEvents(ctx, id, []tick.EventInput{ev}); err != nil {
			return nil, roundTime{}, err
		}
	}
	start, cpu0 := time.Now(), cpuTime()
	// due is when tick i is due at rate: it counts from then.
	due := func(i int) time.Time {
		return start.Add(time.Duration(float64(i) * float64(time.Second) / rate))
	}
	writers0, _ := store.Writers(w.a.Chars.DB())
	results := make([]tickOutcome, len(w.ids))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(w.ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pprof.SetGoroutineLabels(ctx)
			for i := range work {
				var acc atomic.Int64
				tctx := context.WithValue(ctx, modelTimeKey{}, &acc)
				t0 := time.Now()
				if rate > 0 {
					t0 = due(i)
				}
				res, err := w.a.Engine.Tick(tctx, w.ids[i])
				results[i] = tickOutcome{total: time.Since(t0), model: time.Duration(acc.Load()), res: res, err: err}
			}
		}()
	}
	for i := range w.ids {
		if rate > 0 {
			if d := time.Until(due(i)); d > 0 {
				time.Sleep(d)
			}
		}
		work <- i
	}
	close(work)
	wg.Wait()
	writers1, _ := store.Writers(w.a.Chars.DB())
	rt := roundTime{took: time.Since(start), writerHeld: writers1.Held - writers0.Held, cpu: cpuTime() - cpu0}
	if w.comps == nil {
		w.comps = make([]int, len(w.ids))
		for i := range w.comps {
			w.comps[i] = -1
		}
	}
	for i, o := range results {
		if o.err != nil {
			return nil, roundTime{}, fmt.Errorf("tick of %s: %w", w.ids[i], o.err)
		}
		if o.res == nil || o.res.Idle {
			continue
		}
		w.beside += besideSince(w.comps[i], o.res)
		w.comps[i] = o.res.Context.Compactions
	}
	return results, rt, nil
}

// roundLabels returns ctx with the profile labels of the world's round r
// (from 0, warm-up rounds included) added to those it carries: round=N, N
// as --rounds numbers it, and, for a world of a --history comparison
// (history not empty), history=TOKENS, so that a profile of several
// histories can be cut by world (go tool pprof -tagfocus
// 'history=^100000$').
func roundLabels(ctx context.Context, r int, history string) context.Context {
	round := strconv.Itoa(r - warmRounds + 1)
	if history == "" {
		return pprof.WithLabels(ctx, pprof.Labels("round", round))
	}
	return pprof.WithLabels(ctx, pprof.Labels("round", round, "history", history))
}

// tickAcc accumulates the measured rounds of one world.
type tickAcc struct {
	overhead, latency   []time.Duration
	model, elapsed, cpu time.Duration
	compactions, beside int
	alloc, mallocs      uint64
	builds, rowReads    int64
	writerHeld          time.Duration
	tickCPU             time.Duration // the ticking's CPU (roundTime.cpu)
	// rounds, when kept (perRound), are the rounds measured so far.
	perRound bool
	rounds   []TickRound
}

// measureRound runs one round of w's NPCs and adds it to acc.
func (w *tickWorld) measureRound(ctx context.Context, workers int, rate float64, acc *tickAcc) error {
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := cpuTime()
	st0, beside0 := w.a.Retriever.CacheStats(), w.beside
	results, rt, err := w.round(ctx, workers, rate)
	if err != nil {
		return err
	}
	cpu := cpuTime() - cpu0
	acc.cpu += cpu
	acc.writerHeld += rt.writerHeld
	acc.tickCPU += rt.cpu
	st1 := w.a.Retriever.CacheStats()
	builds, reads, beside := st1.Builds-st0.Builds, st1.RowReads-st0.RowReads, w.beside-beside0
	acc.builds += builds
	acc.rowReads += reads
	acc.beside += beside
	runtime.ReadMemStats(&ms1)
	acc.alloc += ms1.TotalAlloc - ms0.TotalAlloc
	acc.mallocs += ms1.Mallocs - ms0.Mallocs
	acc.elapsed += rt.took
	from, comps := len(acc.overhead), acc.compactions
	for _, o := range results {
		acc.overhead = append(acc.overhead, o.total-o.model)
		acc.latency = append(acc.latency, o.total)
		acc.model += o.model
		if o.res.Compaction != nil {
			acc.compactions++
		}
	}
	if acc.perRound {
		r := slices.Clone(acc.overhead[from:])
		slices.Sort(r)
		acc.rounds = append(acc.rounds, TickRound{Round: len(acc.rounds) + 1, MS: msOf(rt.took), Ticks: len(r), TicksPerS: float64(len(r)) / rt.took.Seconds(), CPUMS: msOf(cpu),
			P50MS: msOf(percentile(r, 0.50)), P99MS: msOf(percentile(r, 0.99)), Compactions: acc.compactions - comps,
			BackgroundCompactions: beside, IndexBuilds: builds, RowReads: reads})
	}
	return nil
}

// percentile returns the p-th percentile of sorted (at rank p·n, where
// quantile rounds to the nearest rank), 0 when it is empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// msOf is d in milliseconds, to the microsecond.
func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// measurement sums up the rounds acc holds.
func (w *tickWorld) measurement(b TickOptions, acc *tickAcc) *TickMeasure {
	total := len(acc.overhead)
	slices.Sort(acc.overhead)
	slices.Sort(acc.latency)
	pct := func(p float64) float64 { return msOf(percentile(acc.overhead, p)) }
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return &TickMeasure{
		Mode: "in-process", NPCs: len(w.ids), Ticks: total, HistoryTokens: w.history, OtherMessages: w.others, LatencyMS: msOf(b.Latency), RatePerS: b.Rate,
		TicksPerS: float64(total) / acc.elapsed.Seconds(),
		P50MS:     pct(0.50), P95MS: pct(0.95), P99MS: pct(0.99),
		LatencyP99MS:      msOf(percentile(acc.latency, 0.99)),
		ModelMS:           msOf(acc.model) / float64(total),
		CPUMSPerTick:      msOf(acc.cpu) / float64(total),
		AllocBytesPerTick: int64(acc.alloc) / int64(total),
		AllocsPerTick:     int64(acc.mallocs) / int64(total),
		PeakRSSMiB:        float64(ru.Maxrss) / 1024, // KiB on Linux
		Compactions:       acc.compactions, BackgroundCompactions: acc.beside,
		IndexBuilds:     acc.builds,
		RowReadsPerTick: float64(acc.rowReads) / float64(total),
		WriterBusy:      acc.writerHeld.Seconds() / acc.elapsed.Seconds(),
		CoresBusy:       acc.tickCPU.Seconds() / acc.elapsed.Seconds() / float64(runtime.GOMAXPROCS(0)),
		Rounds:          acc.rounds,
		Aging:           agingOf(acc.rounds),
	}
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
