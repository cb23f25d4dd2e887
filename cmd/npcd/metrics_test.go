package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/npcd/npcd/api"
)

// The daemon's /metrics, scraped after a tick, a compaction and a sleep,
// follows Prometheus naming (the client library's linter) and has the
// series an operator filters on.
func TestMetricsScrapeLints(t *testing.T) {
	client, addr, stop := startDaemonAt(t, t.TempDir())
	defer stop()
	ctx := context.Background()
	if _, _, err := client.PutNPC(ctx, "brom", api.NPCSettings{Name: "Brom", Persona: "You are Brom, the blacksmith.",
		Compaction: &api.CompactionSettings{PreserveRecentMessages: 2, PreserveRatio: 0.01}}); err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"I lost my sword at the forge.", "It has a ruby in the hilt.", "I'll pay forty silver."} {
		if _, err := client.PostEvents(ctx, "brom", []api.Event{{Kind: "say", Actor: "alice", Text: text}}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Tick(ctx, "brom"); err != nil {
			t.Fatalf("tick %d: %v", i, err)
		}
	}
	if _, err := client.PostEvents(ctx, "brom", []api.Event{{Kind: "say", Actor: "alice", Text: "Still there?"}}); err != nil {
		t.Fatal(err) // left pending: the queue gauge counts it
	}
	if _, err := client.Compact(ctx, "brom", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Sleep(ctx, "brom"); err != nil {
		t.Fatal(err)
	}

	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics = %d, %v", resp.StatusCode, err)
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}

	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	has := func(name string, labels map[string]string) (float64, bool) {
		mf := families[name]
		if mf == nil {
			return 0, false
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
		return 0, false
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"npcd_ticks_total", map[string]string{"outcome": "ok"}, 3},
		{"npcd_llm_tokens_total", map[string]string{"model": "builtin", "kind": "prompt"}, 1},
		{"npcd_llm_tokens_total", map[string]string{"model": "builtin", "kind": "completion"}, 1},
		{"npcd_llm_tokens_total", map[string]string{"model": "builtin", "kind": "summary"}, 1},
		{"npcd_context_utilization_ratio", nil, 3},
		{"npcd_http_request_duration_seconds", map[string]string{"method": "POST", "route": "/v1/npcs/{npc}/tick", "status": "200"}, 3},
		{"npcd_http_request_duration_seconds", map[string]string{"method": "PUT", "route": "/v1/npcs/{npc}", "status": "201"}, 1},
		{"npcd_sleep_duration_seconds", map[string]string{"outcome": "ok"}, 1},
		{"npcd_compactions_total", map[string]string{"trigger": "manual"}, 1},
		{"npcd_pending_events", nil, 1},
		{"npcd_database_size_bytes", nil, 4096},
		// The daemon wrote: its writer was held some time.
		{"npcd_db_writer_held_seconds_total", nil, 1e-9},
		{"npcd_db_writer_wait_seconds_total", nil, 0},
		{"npcd_db_checkpoint_held_seconds_total", nil, 0},
		{"npcd_db_wal_restarts_total", nil, 0},
	} {
		v, ok := has(c.name, c.labels)
		if !ok || v < c.min {
			t.Errorf("%s%v = %v (present %v), want at least %v", c.name, c.labels, v, ok, c.min)
		}
	}
	for name := range families {
		if strings.HasPrefix(name, "npcd_") && strings.Contains(name, "utilization") && !strings.HasSuffix(name, "_ratio") &&
			!strings.HasSuffix(name, "_ratio_bucket") {
			t.Errorf("%s: a ratio's name ends in _ratio", name)
		}
	}
}

// The same linter over the registry itself, before any traffic: the series
// that exist from the start are well named too.
func TestMetricsRegistryLints(t *testing.T) {
	m := api.NewMetrics()
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
