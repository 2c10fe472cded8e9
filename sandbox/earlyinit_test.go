//go:build linux

package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A box that needs no relay (a validator's: no door, no egress) is run by
// its init from package initialisation, before the rest of the program is
// initialised and before main (issue 24: the box then costs a Go start-up,
// not the whole CLI's): an init binary whose main never looks at its
// arguments still runs the box, its limits and exit status included.
func TestBoxWithoutARelayRunsBeforeMain(t *testing.T) {
	w := newWorld(t)
	box := w.box
	box.Init = filepath.Join(t.TempDir(), "noinit")
	if out, err := exec.Command("go", "build", "-o", box.Init, "./testdata/noinit").CombinedOutput(); err != nil {
		t.Skipf("cannot build the init: %v\n%s", err, out)
	}
	r := sh(t, box, "echo in-box; grep 'Max processes' /proc/self/limits; exit 5")
	if r.code != 5 || strings.Contains(r.stdout, "main ran") || !strings.Contains(r.stdout, "in-box") {
		t.Fatalf("the box ran %d: %q %q", r.code, r.stdout, r.stderr)
	}
	// "in-box", then "Max processes SOFT HARD processes".
	if got, want := strings.Fields(r.stdout), strconv.Itoa(DefaultLimits.Processes); len(got) != 6 || got[3] != want || got[4] != want {
		t.Errorf("the box's process limit: %q, want %s", r.stdout, want)
	}
	if r := run(t, box, "no-such-command-here"); r.code != 127 {
		t.Errorf("a missing command exits %d, want 127 (%s)", r.code, r.stderr)
	}
}

// A box with a lifeline ends, every process in it, when the other end is
// closed — as it is when the process holding it dies, at any moment,
// before bwrap has the box set to die with its parent too — and its
// processes never hold the lifeline themselves (they would keep it open).
func TestBoxEndsWithItsLifeline(t *testing.T) {
	w := newWorld(t)
	marker := uniqueSleep()
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer lifeW.Close()
	box := w.box
	box.Lifeline = lifeR
	cmd, err := box.Command(context.Background(), "sh", "-c", "ls -l /proc/$$/fd > fds; setsid sleep "+marker+" & sleep "+marker+" & wait")
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lifeR.Close()
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitFor(t, "both sleeps to start", func() bool { return len(processesWith(marker)) == 2 })
	var st syscall.Stat_t
	if err := syscall.Fstat(int(lifeW.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	pipe := "pipe:[" + strconv.FormatUint(st.Ino, 10) + "]"
	if b, err := os.ReadFile(filepath.Join(box.Workspace, "fds")); err != nil || strings.Contains(string(b), pipe) {
		t.Errorf("the box's shell holds the lifeline %s (%v):\n%s", pipe, err, b)
	}
	lifeW.Close()
	waitFor(t, "the box's sleeps to be gone after its lifeline was closed", func() bool { return len(processesWith(marker)) == 0 })
}
