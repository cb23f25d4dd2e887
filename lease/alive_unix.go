//go:build unix

package lease

import (
	"errors"
	"os"
	"strings"
	"syscall"
)

// pidNamespace names this process's PID namespace, so that only holders
// whose pids mean the same thing are checked for life; "" when unknown.
func pidNamespace() string {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return strings.Trim(strings.TrimPrefix(link, "pid:"), "[]")
}

// processGone reports whether no process has this pid.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
