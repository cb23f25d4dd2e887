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
	runPythonTests(t, filepath.Join("clients", "python"), nil, "test_feed_resumes_from_cursor")
}

// TestEvenniaExample runs the Evennia example's tests (examples/evennia:
// its logic, and its glue with Evennia stubbed) with the Python client
// against a real `npcd serve`.
func TestEvenniaExample(t *testing.T) {
	client, err := filepath.Abs(filepath.Join("..", "..", "clients", "python"))
	if err != nil {
		t.Fatal(err)
	}
	runPythonTests(t, filepath.Join("examples", "evennia"), []string{"PYTHONPATH=" + client},
		"test_speech_in_the_room_is_answered_through_the_feed")
}

// runPythonTests runs `python3 -m unittest discover` in dir (relative to
// the repository's root) with NPCD_URL naming a fresh daemon, and checks
// that the test named want ran.
func runPythonTests(t *testing.T, dir string, env []string, want string) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is not installed; the tests of %s need it: %v", dir, err)
	}
	abs, err := filepath.Abs(filepath.Join("..", "..", dir))
	if err != nil {
		t.Fatal(err)
	}
	d := startBinary(t, buildDaemon(t), filepath.Join(t.TempDir(), "npcd.db"))
	defer d.stop(t)

	cmd := exec.Command(py, "-m", "unittest", "discover", "-v", "-s", "tests", "-t", ".")
	cmd.Dir = abs
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NPCD_") && !strings.HasPrefix(kv, "PYTHON") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// No bytecode files left in the source tree.
	cmd.Env = append(cmd.Env, "NPCD_URL=http://"+d.addr, "PYTHONDONTWRITEBYTECODE=1")
	cmd.Env = append(cmd.Env, env...)
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("python3 -m unittest in %s did not finish within 5 minutes:\n%s", dir, out)
	}
	if err != nil {
		t.Fatalf("python3 -m unittest in %s: %v\n%s\n--- npcd log:\n%s", dir, err, out, d.logTail())
	}
	// A run that found no tests passes too; make sure they ran.
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "\nOK") {
		t.Fatalf("python3 -m unittest did not run the tests of %s:\n%s", dir, out)
	}
	t.Logf("%s tests:\n%s", dir, out)
}
