package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tick"
)

// Metrics are npcd's Prometheus metrics, on a registry of their own (never
// the global one, so two daemons can run in one process). Metrics is a
// tick.Observer: pass it to tick.Deps.Observer and to Deps.Metrics. It is
// safe for concurrent use.
type Metrics struct {
	reg           *prometheus.Registry
	ticks         *prometheus.CounterVec
	tickDuration  *prometheus.HistogramVec
	llmCalls      *prometheus.CounterVec
	llmTaskCalls  *prometheus.CounterVec
	llmDuration   *prometheus.HistogramVec
	llmTokens     *prometheus.CounterVec
	compactions   *prometheus.CounterVec
	utilization   prometheus.Histogram
	httpDuration  *prometheus.HistogramVec
	sleepDuration *prometheus.HistogramVec
	handler       http.Handler
}

var _ tick.Observer = (*Metrics)(nil)

// Outcomes of npcd_ticks_total and npcd_sleep_duration_seconds.
const (
	outcomeOK      = "ok"
	outcomeIdle    = "idle"
	outcomeError   = "error"
	outcomeSkipped = "skipped"
)

// Kinds of npcd_llm_tokens_total: prompt tokens of every call, completion
// tokens of every call but summaries, and the completion tokens that wrote
// [CONTEXT SUMMARY]s. The three add up to every token spent.
const (
	tokensPrompt     = "prompt"
	tokensCompletion = "completion"
	tokensSummary    = "summary"
)

// NewMetrics returns the metrics on a new registry, with the Go runtime and
// process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		ticks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npcd_ticks_total", Help: "Ticks run, by outcome (ok, idle, error).",
		}, []string{"outcome"}),
		tickDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "npcd_tick_duration_seconds", Help: "Tick latency, model calls included, by outcome.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"outcome"}),
		llmCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npcd_llm_calls_total", Help: "Model calls (ticks, summaries, consolidation), by model and outcome (ok or the failure code).",
		}, []string{"model", "outcome"}),
		llmTaskCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npcd_llm_task_calls_total", Help: "Model calls, by task: tick (an NPC's turn), summarize (a compaction's [CONTEXT SUMMARY]), extract and reflect (a sleep's consolidation).",
		}, []string{"task"}),
		llmDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "npcd_llm_call_duration_seconds", Help: "Model call latency, by model.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"model"}),
		llmTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npcd_llm_tokens_total", Help: "Model tokens, by model and kind (prompt, completion, summary: the completion tokens of context summaries).",
		}, []string{"model", "kind"}),
		compactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npcd_compactions_total", Help: "Compactions run, by trigger (emergency, background, overflow, manual, sleep, ...).",
		}, []string{"trigger"}),
		utilization: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "npcd_context_utilization_ratio", Help: "Context utilization (tokens over window) after each non-idle tick.",
			Buckets: []float64{.1, .2, .3, .4, .5, .6, .7, .8, .9, 1},
		}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "npcd_http_request_duration_seconds", Help: "HTTP request latency, by method, route pattern and status code.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"method", "route", "status"}),
		sleepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "npcd_sleep_duration_seconds", Help: "Sleeps (consolidation and compaction), by outcome (ok, skipped, error).",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"outcome"}),
	}
	m.reg.MustRegister(m.ticks, m.tickDuration, m.llmCalls, m.llmTaskCalls, m.llmDuration, m.llmTokens, m.compactions, m.utilization,
		m.httpDuration, m.sleepDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Series that exist from the start, so rates work before the first tick.
	for _, o := range []string{outcomeOK, outcomeIdle, outcomeError} {
		m.ticks.WithLabelValues(o)
	}
	for _, o := range []string{outcomeOK, outcomeSkipped, outcomeError} {
		m.sleepDuration.WithLabelValues(o)
	}
	for _, t := range []llm.Task{llm.TaskTick, llm.TaskSummarize, llm.TaskExtract, llm.TaskReflect} {
		m.llmTaskCalls.WithLabelValues(string(t))
	}
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// WatchIndexCache adds gauges of the memory search's in-memory index cache,
// read at each scrape: npcd_index_cache_bytes, npcd_index_cache_limit_bytes,
// npcd_index_cache_entries (NPCs with an index cached) and
// npcd_index_cache_floored_npcs (NPCs whose index alone outgrew the budget,
// their oldest messages left out of it); and its
// counters npcd_index_cache_builds_total, npcd_index_cache_evictions_total,
// npcd_index_cache_rebuilds_total and npcd_index_cache_row_reads_total.
func (m *Metrics) WatchIndexCache(stats func() journal.CacheStats) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "npcd_index_cache_bytes", Help: "Memory held by the search index cache."},
			func() float64 { return float64(stats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "npcd_index_cache_limit_bytes", Help: "Budget of the search index cache (NPCD_INDEX_CACHE_MB)."},
			func() float64 { return float64(stats().Limit) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "npcd_index_cache_entries", Help: "NPCs whose search index is cached."},
			func() float64 { return float64(stats().Entries) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "npcd_index_cache_floored_npcs", Help: "NPCs whose search index alone outgrew NPCD_INDEX_CACHE_MB, their oldest messages left out of it (found through their summaries and memories)."},
			func() float64 { return float64(stats().Floored) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "npcd_index_cache_builds_total", Help: "Search indexes built from the database (an NPC's first search, or one after its index was dropped)."},
			func() float64 { return float64(stats().Builds) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "npcd_index_cache_evictions_total", Help: "Search indexes dropped to keep the cache within NPCD_INDEX_CACHE_MB."},
			func() float64 { return float64(stats().Evictions) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "npcd_index_cache_rebuilds_total", Help: "Search indexes built again within a minute of their eviction: a cache too small for the NPCs being searched."},
			func() float64 { return float64(stats().Rebuilds) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "npcd_index_cache_row_reads_total", Help: "Messages and journal entries that searches showed and read from the database, their NPC's index not keeping them: reads that grow with the ticks mean the results the indexes keep are cut to keep NPCD_INDEX_CACHE_MB."},
			func() float64 { return float64(stats().RowReads) }),
	)
}

// WatchHistoryCache adds gauges of the tick's live-history cache, read at
// each scrape: npcd_history_cache_bytes, npcd_history_cache_limit_bytes
// and npcd_history_cache_entries (NPCs whose history is held); and its
// counters npcd_history_cache_reads_total and
// npcd_history_cache_evictions_total.
func (m *Metrics) WatchHistoryCache(stats func() tick.HistoryCacheStats) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "npcd_history_cache_bytes", Help: "Memory held by the live histories kept between ticks."},
			func() float64 { return float64(stats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "npcd_history_cache_limit_bytes", Help: "Budget of the live-history cache (NPCD_HISTORY_CACHE_MB)."},
			func() float64 { return float64(stats().Limit) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "npcd_history_cache_entries", Help: "NPCs whose live history is held."},
			func() float64 { return float64(stats().Entries) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "npcd_history_cache_reads_total", Help: "Live histories a tick read from the database (an NPC's first tick, a history another process changed, or one dropped to keep within NPCD_HISTORY_CACHE_MB)."},
			func() float64 { return float64(stats().Reads) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "npcd_history_cache_evictions_total", Help: "Live histories dropped to keep within NPCD_HISTORY_CACHE_MB."},
			func() float64 { return float64(stats().Evictions) }),
	)
}

// WatchWAL adds a gauge of the size of SQLite's write-ahead log, read at
// each scrape: npcd_db_wal_bytes.
func (m *Metrics) WatchWAL(size func() int64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "npcd_db_wal_bytes", Help: "Size of the SQLite write-ahead log file."},
		func() float64 { return float64(size()) }))
}

// WatchWriters adds counters of SQLite's single writer, read at each
// scrape: npcd_db_writer_held_seconds_total (the time this process's
// transactions, writes and checkpoint passes held it: a rate near 1 says
// the ticks queue for it), npcd_db_writer_wait_seconds_total (the time
// writers waited for their turn, summed over writers),
// npcd_db_checkpoint_held_seconds_total (the part of the held time that
// background checkpoints took) and npcd_db_wal_restarts_total (the
// checkpoints that started the write-ahead log over).
func (m *Metrics) WatchWriters(stats func() store.WriterStats) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "npcd_db_writer_held_seconds_total", Help: "Time SQLite's single writer was held by this process's transactions, writes and checkpoint passes."},
			func() float64 { return stats().Held.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "npcd_db_writer_wait_seconds_total", Help: "Time writers (checkpoint passes included) waited for their turn at SQLite's single writer, summed over writers."},
			func() float64 { return stats().Waited.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "npcd_db_checkpoint_held_seconds_total", Help: "Time the background checkpoints held SQLite's writers to start the write-ahead log over."},
			func() float64 { return stats().CheckpointHeld.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "npcd_db_wal_restarts_total", Help: "Background checkpoints that started SQLite's write-ahead log over."},
			func() float64 { return float64(stats().Restarts) }),
	)
}

// Registry returns the registry the metrics are on, for adding collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// TickDone counts a tick; it implements tick.Observer.
func (m *Metrics) TickDone(npc string, d time.Duration, r *tick.Result, err error) {
	outcome := outcomeOK
	switch {
	case err != nil || r == nil:
		outcome = outcomeError
	case r.Idle:
		outcome = outcomeIdle
	}
	m.ticks.WithLabelValues(outcome).Inc()
	m.tickDuration.WithLabelValues(outcome).Observe(d.Seconds())
	if outcome != outcomeOK {
		return
	}
	m.utilization.Observe(r.Context.Utilization)
	if r.Compaction != nil {
		m.CompactionDone(r.Compaction.Trigger)
	}
}

// ModelCall counts a tick's model call; it implements tick.Observer.
func (m *Metrics) ModelCall(model string, d time.Duration, u llm.Usage, err error) {
	m.ModelCallFor(llm.TaskTick, model, d, u, err)
}

// ModelCallFor counts a model call made for task: a summary's completion
// tokens count as kind summary.
func (m *Metrics) ModelCallFor(task llm.Task, model string, d time.Duration, u llm.Usage, err error) {
	outcome := outcomeOK
	if err != nil {
		outcome = string(llm.CodeOf(err))
		if outcome == "" {
			outcome = outcomeError
		}
	}
	m.llmCalls.WithLabelValues(model, outcome).Inc()
	m.llmTaskCalls.WithLabelValues(string(task)).Inc()
	m.llmDuration.WithLabelValues(model).Observe(d.Seconds())
	completion := tokensCompletion
	if task == llm.TaskSummarize {
		completion = tokensSummary
	}
	m.llmTokens.WithLabelValues(model, tokensPrompt).Add(float64(max(0, u.PromptTokens)))
	m.llmTokens.WithLabelValues(model, completion).Add(float64(max(0, u.CompletionTokens)))
}

// TaskCalls returns how many model calls were made for task, failed ones
// included: the summarizer calls of the compactions, for instance.
func (m *Metrics) TaskCalls(task llm.Task) int64 {
	var d dto.Metric
	if err := m.llmTaskCalls.WithLabelValues(string(task)).Write(&d); err != nil {
		return 0
	}
	return int64(d.GetCounter().GetValue())
}

// CompactionDone counts a compaction that no tick reported: the Server
// calls it for manual compactions, and the sleep scheduler's wiring may for
// sleep compactions. Compactions run inside a tick are counted by TickDone.
func (m *Metrics) CompactionDone(trigger string) {
	m.compactions.WithLabelValues(trigger).Inc()
}

// SleepDone times a sleep, asked for over the API or scheduled.
func (m *Metrics) SleepDone(d time.Duration, rep *sleep.Report, err error) {
	outcome := outcomeOK
	switch {
	case err != nil || rep == nil:
		outcome = outcomeError
	case rep.Skipped:
		outcome = outcomeSkipped
	}
	m.sleepDuration.WithLabelValues(outcome).Observe(d.Seconds())
}

// Request times one HTTP request by method, route pattern and status.
func (m *Metrics) Request(method, route string, status int, d time.Duration) {
	m.httpDuration.WithLabelValues(method, route, strconv.Itoa(status)).Observe(d.Seconds())
}

// Gauge reads one value at scrape time; an error leaves the sample out of
// that scrape rather than failing it.
type Gauge func(ctx context.Context) (float64, error)

// gaugeTimeout bounds a Gauge's read, so a busy database cannot hold a scrape.
const gaugeTimeout = 5 * time.Second

// WatchStore adds the gauges read from the database at scrape time:
// npcd_pending_events (the event queue's depth, all NPCs) and
// npcd_database_size_bytes.
func (m *Metrics) WatchStore(pendingEvents, databaseBytes Gauge) {
	m.reg.MustRegister(&gaugeCollector{
		desc: prometheus.NewDesc("npcd_pending_events", "Perceived events no tick has consumed yet, all NPCs together.", nil, nil),
		read: pendingEvents,
	}, &gaugeCollector{
		desc: prometheus.NewDesc("npcd_database_size_bytes", "Size of the database (SQLite: the main file, without the WAL).", nil, nil),
		read: databaseBytes,
	})
}

type gaugeCollector struct {
	desc *prometheus.Desc
	read Gauge
}

func (g *gaugeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), gaugeTimeout)
	defer cancel()
	v, err := g.read(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v)
}
