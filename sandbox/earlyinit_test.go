//go:build linux

package sandbox

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
