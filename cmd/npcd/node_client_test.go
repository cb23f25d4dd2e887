package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNodeClient runs the Node client's tests (clients/node: `npm test`,
// which compiles it with TypeScript, checks its generated types against
// api/openapi.yaml and runs node:test) against a real `npcd serve`. It runs
// `npm ci` first when node_modules is missing. Under CI (CI=true) a machine
// without node and npm fails the test, as does a failed `npm ci`; elsewhere
// a machine without them skips it.
func TestNodeClient(t *testing.T) {
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node and npm are needed for the Node client's tests (node: %v, npm: %v)", errNode, errNpm)
		}
		t.Skipf("node or npm is not installed; the Node client's tests need them (CI fails without them)")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "clients", "node"))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NPCD_") && !strings.HasPrefix(kv, "NODE_") {
			env = append(env, kv)
		}
	}
	run := func(limit time.Duration, extra []string, name string, args ...string) ([]byte, error) {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(append([]string{}, env...), extra...)
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(limit):
			cmd.Process.Kill()
			<-done
			t.Fatalf("%s %s did not finish within %s:\n%s", name, strings.Join(args, " "), limit, out)
		}
		return out, err
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
		if out, err := run(10*time.Minute, nil, npm, "ci", "--no-audit", "--no-fund"); err != nil {
			t.Fatalf("npm ci in clients/node: %v\n%s", err, out)
		}
	}
	v, err := run(time.Minute, nil, node, "--version")
	if err != nil {
		t.Fatalf("node --version: %v\n%s", err, v)
	}
	var major int
	if _, err := fmt.Sscanf(string(v), "v%d.", &major); err != nil || major < 20 {
		t.Fatalf("node %s: the Node client needs node 20 or later", strings.TrimSpace(string(v)))
	}

	d := startBinary(t, buildDaemon(t), filepath.Join(t.TempDir(), "npcd.db"))
	defer d.stop(t)
	out, err := run(5*time.Minute, []string{"NPCD_URL=http://" + d.addr}, npm, "test")
	if err != nil {
		t.Fatalf("npm test: %v\n%s\n--- npcd log:\n%s", err, out, d.logTail())
	}
	// A run that found no tests passes too; make sure they ran.
	s := string(out)
	for _, want := range []string{"the feed resumes from a stored cursor", "generated types are up to date", "# fail 0"} {
		if !strings.Contains(s, want) {
			t.Fatalf("npm test did not run the client's tests (no %q):\n%s", want, s)
		}
	}
	t.Logf("node %s; client tests:\n%s", strings.TrimSpace(string(v)), s)
}
