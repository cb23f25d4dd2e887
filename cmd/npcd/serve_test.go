package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/npcd/npcd/api"
	"github.com/npcd/npcd/internal/testdb"
	"github.com/npcd/npcd/store"
)

// startDaemon runs serve on a free port with a database in dir and returns
// a client and a stop function that waits for a clean shutdown.
func startDaemon(t *testing.T, dir string) (*api.Client, func()) {
	t.Helper()
	client, _, stop := startDaemonAt(t, dir)
	return client, stop
}

// startDaemonAt is startDaemon that also returns the address it listens on.
func startDaemonAt(t *testing.T, dir string) (*api.Client, string, func()) {
	t.Helper()
	cfg := defaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.DB = filepath.Join(dir, "npcd.db")
	cfg.LogLevel = "error"
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

// The tests' database (internal/testdb) must have the daemon's schema.
func TestTestDatabaseHasTheDaemonsSchema(t *testing.T) {
	key := func(ms []store.Migration) []string {
		var out []string
		for _, m := range ms {
			out = append(out, fmt.Sprintf("%s v%d", m.Component, m.Version))
		}
		return out
	}
	if diff := cmp.Diff(key(migrations()), key(testdb.Migrations())); diff != "" {
		t.Fatalf("schema (-daemon +tests):\n%s", diff)
	}
}
