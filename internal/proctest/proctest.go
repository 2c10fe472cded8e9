// Package proctest lets tests check that a process they had started is
// gone.
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser/internal/procgroup"
)

// uniqueSeq numbers UniqueArg's answers within this process.
var uniqueSeq atomic.Int64

// UniqueArg is a number for a test's command line (`sleep N`) that no
// other process on the machine is given: tests find their processes by
// argument (FindProcess), and another test binary's — another package's
// in the same `go test ./...`, or another checkout's — must never be taken
// for theirs. Each process has 63 of its own, derived from its pid.
func UniqueArg() string {
	return strconv.Itoa(2_000_000 + os.Getpid()*64 + 1 + int(uniqueSeq.Add(1)%63))
}

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

// Binary is a main package built at most once per test run, on first use,
// for the tests that need the program as a process of its own. The test
// binary's TestMain sets Dir (and removes it at the end).
type Binary struct {
	Package string // as `go build` takes it, from the test's package directory
	Dir     string // where it is built

	once sync.Once
	path string
	err  error
}

// Path returns the built program, building it on the first call.
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		pkg, err := filepath.Abs(b.Package)
		if err != nil {
			b.err = err
			return
		}
		bin := filepath.Join(b.Dir, filepath.Base(pkg)) // the program's own name: cmd/purser → purser
		if out, err := exec.Command("go", "build", "-o", bin, b.Package).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %w\n%s", b.Package, err, out)
			return
		}
		b.path = bin
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// FindProcess returns the pid of a host process with arg among its
// arguments, or 0: a pid inside a box (its own pid namespace) means nothing
// outside it, so a boxed process is found by an argument only it carries.
func FindProcess(arg string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range bytes.Split(b, []byte{0}) {
			if string(a) == arg {
				pid, _ := strconv.Atoi(filepath.Base(d))
				return pid
			}
		}
	}
	return 0
}
