// Package proctest lets tests check that a process they had started is
// gone.
package proctest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser/internal/procgroup"
)

// Alive reports whether pid is a live process. A zombie is not: it holds
// nothing and does nothing, and an orphan's zombie waits for whoever reaps
// it.
func Alive(pid int) bool {
	p, ok := procgroup.Stat(pid)
	return ok && p.State != "Z"
}

// RequireGone reads the pid a test's process wrote to dir/name and fails
// the test unless that process is gone within wait; one still alive then is
// killed, so that a failing test leaves nothing behind.
func RequireGone(t testing.TB, dir, name string, wait time.Duration) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	deadline := time.Now().Add(wait)
	for Alive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if Alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("%s (%d) is still running", name, pid)
	}
}
