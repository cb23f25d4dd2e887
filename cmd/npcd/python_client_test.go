package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPythonClient runs the Python client's tests (clients/python) with the
// machine's python3 against a real `npcd serve`. A machine without python3
// fails the test: the client must not go untested silently.
func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is not installed; the Python client's tests need it: %v", err)
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "clients", "python"))
	if err != nil {
		t.Fatal(err)
	}
	d := startBinary(t, buildDaemon(t), filepath.Join(t.TempDir(), "npcd.db"))
	defer d.stop(t)

	cmd := exec.Command(py, "-m", "unittest", "discover", "-v", "-s", "tests", "-t", ".")
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NPCD_") && !strings.HasPrefix(kv, "PYTHON") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// No bytecode files left in the source tree.
	cmd.Env = append(cmd.Env, "NPCD_URL=http://"+d.addr, "PYTHONDONTWRITEBYTECODE=1")
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("python3 -m unittest did not finish within 5 minutes:\n%s", out)
	}
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s\n--- npcd log:\n%s", err, out, d.logTail())
	}
	// A run that found no tests passes too; make sure they ran.
	if !strings.Contains(string(out), "test_feed_resumes_from_cursor") || !strings.Contains(string(out), "\nOK") {
		t.Fatalf("python3 -m unittest did not run the client's tests:\n%s", out)
	}
	t.Logf("python client tests:\n%s", out)
}
