//go:build unix

package lease_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/npcd/npcd/internal/testdb"
	"github.com/npcd/npcd/lease"
)

// A daemon restarted on the same host after a crash takes the NPCs of its
// former self at once, without waiting for their leases to expire.
func TestLeasesOfADeadProcessOfThisHostAreTakenAtOnce(t *testing.T) {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skipf("no /proc/self/ns/pid here: %v", err)
	}
	ns := strings.Trim(strings.TrimPrefix(link, "pid:"), "[]")
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	db := testdb.Open(t)
	former, err := lease.New(db, lease.Config{Holder: fmt.Sprintf("%s/%d/%s/0000", host, dead.Process.Pid, ns)})
	if err != nil {
		t.Fatal(err)
	}
	alive, err := lease.New(db, lease.Config{Holder: fmt.Sprintf("%s/%d/%s/1111", host, os.Getppid(), ns)})
	if err != nil {
		t.Fatal(err)
	}
	restarted, err := lease.New(db, lease.Config{})
	if err != nil {
		t.Fatal(err)
	}
	hold(t, former, "brom")
	hold(t, alive, "anna")
	release, fresh := hold(t, restarted, "brom")
	release()
	if !fresh {
		t.Error("the lease of a dead former self came back not fresh")
	}
	// A live process of this host keeps its lease.
	wantBusy(t, restarted, "anna")
}
