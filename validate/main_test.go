package validate_test

import (
	"os"
	"testing"
	"time"

	"github.com/purser-dev/purser/internal/proctest"
	"github.com/purser-dev/purser/sandbox"
	"github.com/purser-dev/purser/validate"
)

func TestMain(m *testing.M) {
	if sandbox.IsInit() { // the box's init: the test binary plays purser
		sandbox.InitMain()
	}
	if os.Getenv(ownerEnv) != "" { // the test binary plays purser
		os.Exit(playOwner())
	}
	if os.Getenv(residentOwnerEnv) != "" { // the test binary plays purser
		os.Exit(playResidentOwner())
	}
	os.Exit(m.Run())
}

// mode is a way validators run: unboxed, as before, and in a box.
type mode struct {
	name  string
	boxed bool
}

var modes = []mode{{"sandbox=off", false}, {"sandbox=on", true}}

// runner returns the Runner of mode m, skipping a boxed one where no box can
// be made unless PURSER_TEST_SANDBOX=required (CI), where it fails.
func (m mode) runner(t *testing.T) validate.Runner {
	t.Helper()
	if !m.boxed {
		return validate.Runner{}
	}
	requireBox(t)
	return validate.Runner{Sandbox: &validate.Sandbox{Homes: t.TempDir()}}
}

func requireBox(t *testing.T) {
	t.Helper()
	if err := sandbox.Available(); err != nil {
		if os.Getenv("PURSER_TEST_SANDBOX") == "required" {
			t.Fatalf("PURSER_TEST_SANDBOX=required: %v", err)
		}
		t.Skip(err)
	}
}

// requireNoProcess fails when a host process still runs with arg among its
// arguments after wait: how a boxed process is looked for, its pid inside the
// box meaning nothing outside.
func requireNoProcess(t *testing.T, arg string, wait time.Duration) {
	t.Helper()
	for end := time.Now().Add(wait); ; time.Sleep(50 * time.Millisecond) {
		pid := proctest.FindProcess(arg)
		if pid == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("a process with argument %q (pid %d) still runs", arg, pid)
		}
	}
}
