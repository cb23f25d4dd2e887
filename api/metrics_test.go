package api

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tick"
)

func TestMetricsAfterTicks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{compactor: true})
	ctx := context.Background()
	e.put("brom", bromSettings())
	e.say("brom", "evt-1", "I lost my sword at the forge.")
	res, err := e.client.Tick(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Tick(ctx, "brom"); err != nil { // idle
		t.Fatal(err)
	}
	if _, err := e.client.Compact(ctx, "brom", ""); err != nil {
		t.Fatal(err)
	}

	r := e.do("GET", "/metrics", "")
	if r.status != 200 {
		t.Fatalf("GET /metrics = %d", r.status)
	}
	text := string(r.body)
	for _, want := range []string{
		`npcd_ticks_total{outcome="ok"} 1`,
		`npcd_ticks_total{outcome="idle"} 1`,
		`npcd_ticks_total{outcome="error"} 0`,
		`npcd_tick_duration_seconds_count{outcome="ok"} 1`,
		`npcd_llm_calls_total{model="builtin",outcome="ok"} ` + itoa(res.Usage.LLMCalls),
		`npcd_llm_task_calls_total{task="tick"} ` + itoa(res.Usage.LLMCalls),
		`npcd_llm_tokens_total{kind="prompt",model="builtin"} ` + itoa(res.Usage.PromptTokens),
		`npcd_llm_tokens_total{kind="completion",model="builtin"} ` + itoa(res.Usage.CompletionTokens),
		`npcd_compactions_total{trigger="manual"} 1`,
		`npcd_context_utilization_ratio_count 1`,
		`npcd_http_request_duration_seconds_count{method="POST",route="/v1/npcs/{npc}/tick",status="200"} 2`,
		`npcd_http_request_duration_seconds_count{method="PUT",route="/v1/npcs/{npc}",status="201"} 1`,
		`go_goroutines`,
		`process_`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestMetricsObserver(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	m.TickDone("brom", time.Second, nil, errors.New("boom"))
	m.TickDone("brom", time.Millisecond, &tick.Result{Idle: true}, nil)
	m.TickDone("brom", time.Second, &tick.Result{Context: tick.Context{Utilization: 0.85}, Compaction: &tick.Compaction{Trigger: "emergency"}}, nil)
	m.ModelCall("gpt", time.Second, llm.Usage{}, &llm.Error{Code: llm.CodeRateLimit})
	m.ModelCall("gpt", time.Second, llm.Usage{}, errors.New("other"))
	m.ModelCall("gpt", time.Second, llm.Usage{PromptTokens: 7, CompletionTokens: 3}, nil)
	m.ModelCallFor(llm.TaskSummarize, "gpt", time.Second, llm.Usage{PromptTokens: 100, CompletionTokens: 40}, nil)
	m.ModelCallFor(llm.TaskExtract, "gpt", time.Second, llm.Usage{PromptTokens: 50, CompletionTokens: 5}, nil)
	m.SleepDone(time.Second, &sleep.Report{}, nil)
	m.SleepDone(time.Second, &sleep.Report{Skipped: true}, nil)
	m.SleepDone(time.Second, nil, errors.New("busy"))
	m.SleepDone(time.Second, nil, errors.New("busy"))
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"error ticks", counterValue(m.ticks.WithLabelValues("error")), 1},
		{"idle ticks", counterValue(m.ticks.WithLabelValues("idle")), 1},
		{"ok ticks", counterValue(m.ticks.WithLabelValues("ok")), 1},
		{"emergency compactions", counterValue(m.compactions.WithLabelValues("emergency")), 1},
		{"rate-limited calls", counterValue(m.llmCalls.WithLabelValues("gpt", "rate_limit")), 1},
		{"other failed calls", counterValue(m.llmCalls.WithLabelValues("gpt", "error")), 1},
		{"ok calls", counterValue(m.llmCalls.WithLabelValues("gpt", "ok")), 3},
		{"prompt tokens", counterValue(m.llmTokens.WithLabelValues("gpt", "prompt")), 157},
		{"completion tokens", counterValue(m.llmTokens.WithLabelValues("gpt", "completion")), 8},
		{"summary tokens", counterValue(m.llmTokens.WithLabelValues("gpt", "summary")), 40},
		{"tick calls", float64(m.TaskCalls(llm.TaskTick)), 3},
		{"summarizer calls", float64(m.TaskCalls(llm.TaskSummarize)), 1},
		{"extract calls", float64(m.TaskCalls(llm.TaskExtract)), 1},
		{"reflect calls", float64(m.TaskCalls(llm.TaskReflect)), 0},
		{"ok sleeps", float64(histCount(m.sleepDuration.WithLabelValues("ok"))), 1},
		{"skipped sleeps", float64(histCount(m.sleepDuration.WithLabelValues("skipped"))), 1},
		{"failed sleeps", float64(histCount(m.sleepDuration.WithLabelValues("error"))), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	// Only the non-idle, successful tick is a utilization sample.
	if n := sampleCount(t, m, "npcd_context_utilization_ratio"); n != 1 {
		t.Errorf("utilization samples = %d, want 1", n)
	}
	// Two Metrics never share state.
	if got := counterValue(NewMetrics().ticks.WithLabelValues("error")); got != 0 {
		t.Errorf("a new Metrics counts %v error ticks, want 0", got)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// histCount reads how many observations one histogram holds.
func histCount(o prometheus.Observer) uint64 {
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		panic(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// counterValue reads one counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// sampleCount returns how many observations histogram name holds.
func sampleCount(t *testing.T, m *Metrics, name string) uint64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestMetricsWatchCacheAndWAL(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	st := journal.CacheStats{Bytes: 4096, Limit: 128 << 20, Entries: 3, Builds: 7, Evictions: 4, Rebuilds: 2, RowReads: 11, Floored: 1}
	m.WatchIndexCache(func() journal.CacheStats { return st })
	m.WatchWAL(func() int64 { return 12345 })
	m.WatchWriters(func() store.WriterStats {
		return store.WriterStats{Held: 1500 * time.Millisecond, Waited: 250 * time.Millisecond, CheckpointHeld: 125 * time.Millisecond, Restarts: 6}
	})
	m.WatchHistoryCache(func() tick.HistoryCacheStats {
		return tick.HistoryCacheStats{Bytes: 2048, Limit: 256 << 20, Entries: 5, Reads: 9, Evictions: 3}
	})
	rec := httptest.NewRecorder()
	m.handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	for _, want := range []string{
		"npcd_index_cache_bytes 4096", "npcd_index_cache_limit_bytes 1.34217728e+08", "npcd_index_cache_entries 3", "npcd_index_cache_floored_npcs 1", "npcd_db_wal_bytes 12345",
		"npcd_index_cache_builds_total 7", "npcd_index_cache_evictions_total 4", "npcd_index_cache_rebuilds_total 2",
		"npcd_index_cache_row_reads_total 11",
		"npcd_history_cache_bytes 2048", "npcd_history_cache_limit_bytes 2.68435456e+08", "npcd_history_cache_entries 5",
		"npcd_history_cache_reads_total 9", "npcd_history_cache_evictions_total 3",
		"npcd_db_writer_held_seconds_total 1.5", "npcd_db_writer_wait_seconds_total 0.25", "npcd_db_checkpoint_held_seconds_total 0.125",
		"npcd_db_wal_restarts_total 6",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
