package bench

import (
	"context"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
)

// startCPUProfile writes a profile and stops it once, however often stop
// is called; without a path it does nothing, and a path it cannot create
// is an error naming the flag.
func TestStartCPUProfile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cpu.pprof")
	stop, err := startCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	stop()
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("no profile written: %v", err)
	}
	// Stopped: another profile can start.
	again, err := startCPUProfile(filepath.Join(dir, "again.pprof"))
	if err != nil {
		t.Fatalf("a profile after stop: %v", err)
	}
	again()
	none, err := startCPUProfile("")
	if err != nil {
		t.Fatal(err)
	}
	none()
	if _, err := startCPUProfile(filepath.Join(dir, "missing", "cpu.pprof")); err == nil || !strings.Contains(err.Error(), "--cpuprofile") {
		t.Fatalf("an impossible path: %v, want an error naming --cpuprofile", err)
	}
}

// A round's profile label numbers it as --rounds does, the first measured
// round 1, and keeps the labels its context carries: a warm-up round stays
// bench=setup, which -tagignore leaves out. A world of a --history
// comparison names its history (history=TOKENS, 0 included); another
// carries no such label.
func TestRoundLabels(t *testing.T) {
	setup := pprof.WithLabels(context.Background(), pprof.Labels("bench", "setup"))
	for _, c := range []struct {
		ctx     context.Context
		r       int
		history string
		round   string
		bench   string
	}{
		{setup, 0, "", strconv.Itoa(1 - warmRounds), "setup"},
		{setup, warmRounds - 1, "100000", "0", "setup"},
		{context.Background(), warmRounds, "", "1", ""},
		{context.Background(), warmRounds + 59, "1000", "60", ""},
		{context.Background(), warmRounds + 1, "0", "2", ""},
	} {
		ctx := roundLabels(c.ctx, c.r, c.history)
		round, _ := pprof.Label(ctx, "round")
		bench, _ := pprof.Label(ctx, "bench")
		history, labelled := pprof.Label(ctx, "history")
		if round != c.round || bench != c.bench {
			t.Errorf("round %d of the world: labels round=%q bench=%q, want round=%q bench=%q", c.r, round, bench, c.round, c.bench)
		}
		if labelled != (c.history != "") || history != c.history {
			t.Errorf("round %d of a world of history %q: label history=%q (set: %v)", c.r, c.history, history, labelled)
		}
	}
}
