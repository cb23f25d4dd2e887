package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npcd/npcd/api"
)

// startDaemon runs serve on a free port with a database in dir and returns
// a client and a stop function that waits for a clean shutdown.
func startDaemon(t *testing.T, dir string) (*api.Client, func()) {
	t.Helper()
	client, _, stop := startDaemonWith(t, dir)
	return client, stop
}

// startDaemonAt is startDaemon that also returns the address it listens on.
func startDaemonAt(t *testing.T, dir string) (*api.Client, string, func()) {
	t.Helper()
	return startDaemonWith(t, dir)
}

// startDaemonWith is startDaemonAt with configuration changes.
func startDaemonWith(t *testing.T, dir string, configure ...func(*Config)) (*api.Client, string, func()) {
	t.Helper()
	cfg := defaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.DB = filepath.Join(dir, "npcd.db")
	cfg.LogLevel = "error"
	for _, f := range configure {
		f(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	var logs strings.Builder
	go func() { done <- serve(ctx, cfg, &logs, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	client := api.NewClient("http://"+addr, "", &http.Client{Timeout: time.Minute})
	return client, addr, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}
}

// TestWalkthroughAndRestart follows the README: create an NPC, tell it
// something, tick it, read its history; then restart the daemon on the same
// file and find everything again.
func TestWalkthroughAndRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	client, stop := startDaemon(t, dir)
	if _, created, err := client.PutNPC(ctx, "brom", api.NPCSettings{Name: "Brom", Persona: "You are Brom, the gruff village blacksmith of Oakvale."}); err != nil || !created {
		t.Fatalf("put: created=%v %v", created, err)
	}
	acc, err := client.PostEvents(ctx, "brom", []api.Event{{ID: "evt-1", Kind: "say", Actor: "alice", Text: "I lost my sword at the forge.", Room: "forge"}})
	if err != nil || acc.Accepted != 1 {
		t.Fatalf("events: %+v %v", acc, err)
	}
	res, err := client.Tick(ctx, "brom")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Actions) == 0 || res.Actions[0].Tool != "say" || !strings.Contains(res.Actions[0].Args["text"].(string), "keep an eye out") {
		t.Fatalf("tick: %+v, want a say promising to look out", res)
	}
	stop()

	client, stop = startDaemon(t, dir)
	defer stop()
	npc, err := client.GetNPC(ctx, "brom")
	if err != nil || npc.Name != "Brom" || npc.Context.LiveMessages == 0 {
		t.Fatalf("after restart: %+v %v", npc, err)
	}
	ms, err := client.History(ctx, "brom", api.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 2 || !strings.Contains(ms[0].Content, "I lost my sword") {
		t.Fatalf("history after restart: %+v", ms)
	}
	// The event id is remembered across the restart.
	acc, err = client.PostEvents(ctx, "brom", []api.Event{{ID: "evt-1", Kind: "say", Actor: "alice", Text: "I lost my sword at the forge."}})
	if err != nil || acc.Duplicates != 1 {
		t.Fatalf("repeated event after restart: %+v %v", acc, err)
	}
}

// The daemon truncates the write-ahead log that a load grew, and reports its
// size and the search index cache's in /metrics.
func TestDaemonTruncatesTheWALAfterLoad(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	client, addr, stop := startDaemonWith(t, dir, func(c *Config) { c.WALCheckpoint = time.Second; c.IndexCacheMB = 16 })
	defer stop()
	path := filepath.Join(dir, "npcd.db")
	text := strings.Repeat("The north road is long and the wolves are hungry this winter. ", 60)
	var peak int64
	for n := 0; n < 3; n++ {
		id := fmt.Sprintf("npc-%d", n)
		if _, _, err := client.PutNPC(ctx, id, api.NPCSettings{Name: "Brom", Persona: "You are Brom, the blacksmith."}); err != nil {
			t.Fatal(err)
		}
		for b := 0; b < 3; b++ {
			evs := make([]api.Event, 200)
			for i := range evs {
				evs[i] = api.Event{Kind: "say", Actor: "alice", Text: fmt.Sprintf("%d-%d: %s", b, i, text)}
			}
			if _, err := client.PostEvents(ctx, id, evs); err != nil {
				t.Fatal(err)
			}
			peak = max(peak, walSize(path))
		}
		if _, err := client.Tick(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Memory(ctx, id, "wolves", 3); err != nil {
			t.Fatal(err)
		}
	}
	if peak < 1<<20 {
		t.Fatalf("the WAL peaked at %d bytes under load, want more than 1 MiB", peak)
	}
	deadline := time.Now().Add(10 * time.Second)
	for walSize(path) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if size := walSize(path); size > 0 {
		t.Fatalf("the WAL is still %d bytes (peak %d) well after the load", size, peak)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"npcd_db_wal_bytes 0", "npcd_index_cache_entries 3", fmt.Sprintf("npcd_index_cache_limit_bytes %g", float64(16<<20))} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// A daemon started on stored NPCs builds their search indexes in the
// background, before any tick asks: the first tick after a restart then
// builds none.
func TestDaemonWarmsSearchIndexesAtStart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	client, stop := startDaemon(t, dir)
	ids := []string{"brom", "mara", "tobin"}
	for _, id := range ids {
		if _, _, err := client.PutNPC(ctx, id, api.NPCSettings{Name: id, Persona: "You keep the village inn."}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.PostEvents(ctx, id, []api.Event{{Kind: "say", Actor: "alice", Text: "I lost my sword at the forge."}}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Tick(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	stop()

	client, addr, stop := startDaemonAt(t, dir)
	defer stop()
	metric := func(name string) string {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				return v
			}
		}
		t.Fatalf("/metrics lacks %s", name)
		return ""
	}
	deadline := time.Now().Add(30 * time.Second)
	for metric("npcd_index_cache_builds_total") != "3" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := metric("npcd_index_cache_builds_total"); got != "3" {
		t.Fatalf("npcd_index_cache_builds_total %s after the start, want the 3 NPCs' indexes built", got)
	}
	if got := metric("npcd_index_cache_entries"); got != "3" {
		t.Fatalf("npcd_index_cache_entries %s, want 3", got)
	}
	if _, err := client.PostEvents(ctx, "mara", []api.Event{{Kind: "say", Actor: "alice", Text: "Have you seen my sword?"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Tick(ctx, "mara"); err != nil {
		t.Fatal(err)
	}
	if got := metric("npcd_index_cache_builds_total"); got != "3" {
		t.Fatalf("npcd_index_cache_builds_total %s after a tick, want 3: the tick built its index again", got)
	}
}
