package bench

import (
	"os"
	"path/filepath"
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
