package validate_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/internal/procgroup"
	"github.com/purser-dev/purser/internal/procgroup/supervisor"
	"github.com/purser-dev/purser/internal/proctest"
	"github.com/purser-dev/purser/validate"
)

// supervisedRunner is an unboxed Runner in a process that supervises its
// children (as purser does), its resident supervisors all closed when the
// test ends.
func supervisedRunner(t *testing.T) validate.Runner {
	t.Helper()
	validate.Close()
	procgroup.Supervise()
	t.Cleanup(func() {
		procgroup.DisableSupervision()
		validate.Close()
	})
	return validate.Runner{}
}

// A workspace's unboxed validators run one after another under the same
// resident supervisor, each in a process group of its own with the
// supervisor's mark in its environment; what each leaves running — a
// setsid double fork included — ends with it, the supervisor staying.
func TestResidentSupervisorIsReusedAndLeftoversEndWithEachRun(t *testing.T) {
	r := supervisedRunner(t)
	ws := t.TempDir()
	var sup int
	for i, secs := range []int{6441, 6443} {
		res := run(t, r, ws, fmt.Sprintf("sleep %d >/dev/null 2>&1 & setsid sh -c 'sleep %d' >/dev/null 2>&1 & "+
			`sleep 0.2; echo "mark=$%s pgid=$(cut -d' ' -f5 /proc/$$/stat) self=$$ dir=$(pwd)"`, secs, secs+1, procgroup.MarkEnv))
		for _, s := range []int{secs, secs + 1} {
			requireNoProcess(t, strconv.Itoa(s), 5*time.Second)
		}
		pid := oneIdleBox(t)
		if i > 0 && pid != sup {
			t.Fatalf("the second validator ran under supervisor %d, not the first's (%d)", pid, sup)
		}
		sup = pid
		if !proctest.Alive(sup) {
			t.Fatalf("the resident supervisor %d is gone after a run", sup)
		}
		st, _ := procgroup.Stat(sup)
		var self string
		if _, err := fmt.Sscanf(res.Output[strings.Index(res.Output, "self="):], "self=%s", &self); err != nil {
			t.Fatalf("output: %q", res.Output)
		}
		want := fmt.Sprintf("mark=%d %s pgid=%s self=%s dir=%s", sup, st.Start, self, self, ws)
		if !strings.Contains(res.Output, want) {
			t.Fatalf("run %d said %q, want %q", i, res.Output, want)
		}
	}
}

// Validators run at once in one workspace get a supervisor each.
func TestResidentSupervisorsRunValidatorsInParallel(t *testing.T) {
	testParallelRunsGetARunnerEach(t, supervisedRunner(t), "supervisors")
}

// A supervisor unused for the idle timeout is closed and waited for.
func TestResidentSupervisorClosesWhenIdle(t *testing.T) {
	testIdleRunnerCloses(t, supervisedRunner, "supervisor")
}

// A validator that times out is stopped — SIGTERM to its group, then
// SIGKILL to everything below the supervisor — and the supervisor serves
// the next run.
func TestResidentSupervisorStopsATimedOutValidator(t *testing.T) {
	r := supervisedRunner(t)
	ws := t.TempDir()
	res := r.RunValidator(context.Background(), ws, purser.Validator{Name: "t", Timeout: 300 * time.Millisecond,
		Run: "trap '' TERM; setsid sh -c 'sleep 6451' & sleep 6452"})
	if res.Passed || !res.TimedOut || !strings.Contains(res.Output, "timed out") {
		t.Fatalf("a timed-out validator: %+v", res)
	}
	requireNoProcess(t, "6451", 5*time.Second)
	requireNoProcess(t, "6452", 5*time.Second)
	sup := oneIdleBox(t)
	run(t, r, ws, "true")
	if again := oneIdleBox(t); again != sup {
		t.Fatalf("the run after a timeout had supervisor %d, not %d", again, sup)
	}
}

// A supervisor killed while it runs a validator fails that run, saying so,
// and the validator it left to init is ended; the next run gets a new
// supervisor.
func TestABrokenResidentSupervisorIsReplaced(t *testing.T) {
	r := supervisedRunner(t)
	ws := t.TempDir()
	run(t, r, ws, "true")
	first := oneIdleBox(t)
	done := make(chan purser.ValidatorResult, 1)
	go func() {
		done <- r.RunValidator(context.Background(), ws, purser.Validator{Name: "b", Run: "sleep 6455"})
	}()
	for end := time.Now().Add(30 * time.Second); proctest.FindProcess("6455") == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the validator did not start in 30 s")
		}
	}
	_ = syscall.Kill(first, syscall.SIGKILL)
	res := <-done
	if res.Passed || !strings.Contains(res.Output, "the validator's supervisor broke") ||
		!strings.Contains(res.Output, "the next validator gets a new supervisor") {
		t.Fatalf("a run whose supervisor was killed: %+v", res)
	}
	run(t, r, ws, "true")
	if second := oneIdleBox(t); second == first {
		t.Fatalf("the killed supervisor %d was used again", first)
	}
	requireNoProcess(t, "6455", 5*time.Second) // orphaned to init, found by its mark
}

// Where Purser does not supervise its children, no supervisor is made
// resident: validators run as before.
func TestNoResidentSupervisorWithoutSupervision(t *testing.T) {
	validate.Close()
	procgroup.DisableSupervision()
	run(t, validate.Runner{}, t.TempDir(), "true")
	if pids := validate.IdleBoxes(); len(pids) != 0 {
		t.Fatalf("resident runners without supervision: %v", pids)
	}
}

// unboxedOwnerEnv makes the test binary play Purser running unboxed
// validators under a resident supervisor (playUnboxedOwner); its value is
// the last validator's script.
const unboxedOwnerEnv = "VALIDATE_TEST_UNBOXED_OWNER_RUN"

func init() {
	if os.Getenv(unboxedOwnerEnv) != "" { // the test binary plays purser
		os.Exit(playUnboxedOwner())
	}
}

// playUnboxedOwner runs a validator that leaves a double fork behind, then
// the one unboxedOwnerEnv names under the same supervisor, and exits when
// that ends (a test kills it before that).
func playUnboxedOwner() int {
	procgroup.Supervise()
	ws, err := os.MkdirTemp("", "validate-owner-")
	if err != nil {
		return 1
	}
	defer os.RemoveAll(ws)
	for _, script := range []string{"setsid sh -c 'sleep 6461' & sleep 0.1", os.Getenv(unboxedOwnerEnv)} {
		res := validate.Runner{}.RunValidator(context.Background(), ws, purser.Validator{Name: "owned", Run: script})
		fmt.Println(res.Output)
	}
	return 0
}

// A Purser killed with SIGKILL takes its resident supervisors with it, and
// every process below them, a setsid double fork included.
func TestResidentSupervisorDiesWithAKilledPurser(t *testing.T) {
	testRunnerDiesWithItsOwner(t, unboxedOwnerEnv, "646", "resident supervisor", residentSupervisorOf)
}

// residentSupervisorOf is the pid of a child of pid running as a resident
// supervisor, or 0.
func residentSupervisorOf(pid int) int {
	for _, child := range childrenOf(strconv.Itoa(pid)) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(child) + "/cmdline")
		if err == nil && slices.Contains(strings.Split(string(b), "\x00"), supervisor.ServeArg) {
			return child
		}
	}
	return 0
}
