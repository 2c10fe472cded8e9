package validate_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/internal/proctest"
	"github.com/purser-dev/purser/validate"
)

// boxedRunner is a boxed Runner whose resident boxes are all closed when
// the test ends.
func boxedRunner(t *testing.T) validate.Runner {
	t.Helper()
	requireBox(t)
	validate.Close()
	t.Cleanup(validate.Close)
	return validate.Runner{Sandbox: &validate.Sandbox{Homes: t.TempDir()}}
}

// run runs script as a validator in ws and fails the test unless it passes.
func run(t *testing.T, r validate.Runner, ws, script string) purser.ValidatorResult {
	t.Helper()
	res := r.RunValidator(context.Background(), ws, purser.Validator{Name: "v", Run: script})
	if !res.Passed {
		t.Fatalf("%q: %+v", script, res)
	}
	return res
}

// oneIdleBox is the one resident box idle, failing the test unless there
// is exactly one.
func oneIdleBox(t *testing.T) int {
	t.Helper()
	pids := validate.IdleBoxes()
	if len(pids) != 1 {
		t.Fatalf("idle resident boxes: %v, want one", pids)
	}
	return pids[0]
}

// A workspace's validators run one after another in the same box, and what
// each leaves running — a setsid double fork included — ends with it, the
// box staying.
func TestResidentBoxIsReusedAndLeftoversEndWithEachRun(t *testing.T) {
	r := boxedRunner(t)
	ws := t.TempDir()
	var box int
	for i, secs := range []int{6341, 6343} {
		run(t, r, ws, fmt.Sprintf("sleep %d >/dev/null 2>&1 & setsid sh -c 'sleep %d' >/dev/null 2>&1 & sleep 0.2", secs, secs+1))
		for _, s := range []int{secs, secs + 1} {
			requireNoProcess(t, strconv.Itoa(s), 5*time.Second)
		}
		pid := oneIdleBox(t)
		if i > 0 && pid != box {
			t.Fatalf("the second validator ran in box %d, not the first's (%d)", pid, box)
		}
		box = pid
		if !proctest.Alive(box) {
			t.Fatalf("the resident box %d is gone after a run", box)
		}
	}
}

// Each run gets an empty /tmp in the box, while the workspace — bound
// under /tmp when it was made there — keeps what the last run wrote.
func TestResidentBoxEmptiesTmpBetweenRuns(t *testing.T) {
	r := boxedRunner(t)
	ws := t.TempDir() // under the host's /tmp: bound under the box's
	run(t, r, ws, "mkdir -p /tmp/d && echo x > /tmp/d/junk && echo kept > made && echo home > $HOME/h")
	box := oneIdleBox(t)
	res := run(t, r, ws, `if [ -e /tmp/d ]; then echo TMP-KEPT; fi; echo "ws=$(cat made) home=$(cat $HOME/h)"`)
	if strings.Contains(res.Output, "TMP-KEPT") || !strings.Contains(res.Output, "ws=kept home=home") {
		t.Fatalf("second run's view:\n%s", res.Output)
	}
	if pid := oneIdleBox(t); pid != box {
		t.Fatalf("the second run had box %d, not %d", pid, box)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "made")); err != nil || string(b) != "kept\n" {
		t.Fatalf("the workspace's file after the runs: %q, %v", b, err)
	}
}

// Validators run at once in one workspace get a box each.
func TestResidentBoxesRunValidatorsInParallel(t *testing.T) {
	testParallelRunsGetARunnerEach(t, boxedRunner(t), "boxes")
}

// testParallelRunsGetARunnerEach runs three validators at once in one
// workspace with r: each passes with its own output, and three resident
// runners (what: "boxes", "supervisors") are left idle.
func testParallelRunsGetARunnerEach(t *testing.T, r validate.Runner, what string) {
	t.Helper()
	ws := t.TempDir()
	var wg sync.WaitGroup
	outs := make([]string, 3)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := r.RunValidator(context.Background(), ws, purser.Validator{Name: "p", Run: fmt.Sprintf("sleep 0.5; echo run%d", i)})
			outs[i] = fmt.Sprintf("%v %s", res.Passed, strings.TrimSpace(res.Output))
		}()
	}
	wg.Wait()
	for i, o := range outs {
		if o != fmt.Sprintf("true run%d", i) {
			t.Errorf("validator %d: %q", i, o)
		}
	}
	if pids := validate.IdleBoxes(); len(pids) != 3 {
		t.Errorf("idle %s after three parallel runs: %v, want three", what, pids)
	}
}

// A box unused for the idle timeout is closed: bwrap has exited and has
// been waited for.
func TestResidentBoxClosesWhenIdle(t *testing.T) {
	testIdleRunnerCloses(t, boxedRunner, "box")
}

// testIdleRunnerCloses runs one validator with a runner from newRunner and
// waits for its resident runner (what: "box", "supervisor"), idle past a
// short idle timeout, to be closed and waited for.
func testIdleRunnerCloses(t *testing.T, newRunner func(*testing.T) validate.Runner, what string) {
	t.Helper()
	defer validate.SetIdleTimeout(300 * time.Millisecond)()
	r := newRunner(t)
	run(t, r, t.TempDir(), "true")
	runner := oneIdleBox(t)
	for end := time.Now().Add(10 * time.Second); len(validate.IdleBoxes()) > 0 || procExists(runner); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the idle %s %d is still there after 10 s (idle: %v)", what, runner, validate.IdleBoxes())
		}
	}
}

// procExists reports whether pid exists at all, a zombie included (a box
// closed and not waited for would stay one).
func procExists(pid int) bool { return syscall.Kill(pid, 0) == nil }

// A box that breaks while idle is replaced without failing the next run; one
// that breaks while it runs a validator fails that run, saying so, and the
// next run gets a new box.
func TestABrokenResidentBoxIsReplaced(t *testing.T) {
	r := boxedRunner(t)
	ws := t.TempDir()
	run(t, r, ws, "true")
	first := oneIdleBox(t)
	_ = syscall.Kill(first, syscall.SIGKILL)
	for end := time.Now().Add(10 * time.Second); procExists(first); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the killed box %d was not waited for in 10 s", first)
		}
	}
	run(t, r, ws, "true")
	second := oneIdleBox(t)
	if second == first {
		t.Fatalf("the killed box %d was used again", first)
	}
	done := make(chan purser.ValidatorResult, 1)
	go func() {
		done <- r.RunValidator(context.Background(), ws, purser.Validator{Name: "b", Run: "sleep 6351"})
	}()
	for end := time.Now().Add(30 * time.Second); proctest.FindProcess("6351") == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the validator did not start in 30 s")
		}
	}
	_ = syscall.Kill(second, syscall.SIGKILL)
	res := <-done
	if res.Passed || !strings.Contains(res.Output, "the validator's box broke") || !strings.Contains(res.Output, "the next validator gets a new box") {
		t.Fatalf("a run whose box was killed: %+v", res)
	}
	requireNoProcess(t, "6351", 5*time.Second)
	run(t, r, ws, "true")
	if third := oneIdleBox(t); third == second || third == first {
		t.Fatalf("the broken box was used again: %d", third)
	}
}

// residentOwnerEnv makes the test binary play Purser running validators in
// a resident box (playResidentOwner); its value is the last validator's
// script.
const residentOwnerEnv = "VALIDATE_TEST_RESIDENT_OWNER_RUN"

// playResidentOwner runs a validator that leaves a double fork behind, then
// the one residentOwnerEnv names in the same (resident) box, and exits when
// that ends (a test kills it before that).
func playResidentOwner() int {
	homes, err := os.MkdirTemp("", "validate-owner-")
	if err != nil {
		return 1
	}
	defer os.RemoveAll(homes)
	r := validate.Runner{Sandbox: &validate.Sandbox{Homes: filepath.Join(homes, "homes")}}
	ws := filepath.Join(homes, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		return 1
	}
	for _, script := range []string{"setsid sh -c 'sleep 6361' & sleep 0.1", os.Getenv(residentOwnerEnv)} {
		res := r.RunValidator(context.Background(), ws, purser.Validator{Name: "owned", Run: script})
		fmt.Println(res.Output)
	}
	return 0
}

// A Purser killed with SIGKILL takes its resident boxes with it, and every
// process in them, a setsid double fork included.
func TestResidentBoxDiesWithAKilledPurser(t *testing.T) {
	requireBox(t)
	testRunnerDiesWithItsOwner(t, residentOwnerEnv, "636", "resident box", residentBoxOf)
}

// testRunnerDiesWithItsOwner runs the test binary as a Purser (ownerEnv)
// whose validators run in a resident runner, one found by runnerOf among its
// children: the first validator's sleep (PREFIX1) ends with its run; the
// second's (PREFIX2, and PREFIX3 in a setsid double fork) and the runner
// end once the owner is killed with SIGKILL.
func testRunnerDiesWithItsOwner(t *testing.T, ownerEnv, prefix, what string, runnerOf func(pid int) int) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	forked, direct := prefix+"2", prefix+"3"
	owner := exec.Command(self)
	owner.Env = append(os.Environ(), ownerEnv+`=setsid sh -c "sleep `+forked+`" & sleep `+direct)
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = owner.Process.Kill(); _ = owner.Wait() }()
	for end := time.Now().Add(30 * time.Second); proctest.FindProcess(forked) == 0 || proctest.FindProcess(direct) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the validator and its double fork did not start in 30 s")
		}
	}
	requireNoProcess(t, prefix+"1", 5*time.Second) // the first run's, ended with it
	runner := runnerOf(owner.Process.Pid)
	if runner == 0 {
		t.Fatalf("the owner's validators do not run in a %s", what)
	}
	if err := owner.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = owner.Wait()
	requireNoProcess(t, forked, 10*time.Second)
	requireNoProcess(t, direct, 10*time.Second)
	for end := time.Now().Add(10 * time.Second); proctest.Alive(runner); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the %s %d outlived its owner", what, runner)
		}
	}
}

// residentBoxOf is the pid of a child of pid running a resident box (a
// bwrap whose init serves requests), or 0.
func residentBoxOf(pid int) int {
	for _, child := range childrenOf(strconv.Itoa(pid)) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(child) + "/cmdline")
		if err == nil && slices.ContainsFunc(strings.Split(string(b), "\x00"), func(a string) bool { return strings.HasPrefix(a, "serve=") }) {
			return child
		}
	}
	return 0
}

// A resident box bounded to a few processes holds no more: the kernel
// refuses the fork (RLIMIT_NPROC, inherited from the box's init), or, where
// it exempts the box (root's), the init ends the run's processes, says so,
// and the box is not used again. Either way nothing is left running and the
// next run passes.
func TestResidentBoxBoundsProcesses(t *testing.T) {
	r := boxedRunner(t)
	r.Sandbox.Limits.Processes = 24
	ws := t.TempDir()
	res := r.RunValidator(context.Background(), ws, purser.Validator{Name: "bomb",
		Run: `sh -c 'for i in $(seq 200); do sleep 6381 & echo $i > /tmp/n; done; sleep 6381' 2>/dev/null; read n < /tmp/n; echo "started=$n"`})
	t.Logf("uid %d: %+v", os.Getuid(), res)
	started := -1
	for _, l := range strings.Split(res.Output, "\n") {
		if v, ok := strings.CutPrefix(l, "started="); ok {
			started, _ = strconv.Atoi(v)
		}
	}
	switch {
	case res.ExitCode == 125 && strings.Contains(res.Output, "more than the box's limit of 24"):
		if pids := validate.IdleBoxes(); len(pids) != 0 {
			t.Errorf("a box ended for too many processes is kept: %v", pids)
		}
	case res.Passed && started > 0 && started < 24:
		oneIdleBox(t)
	default:
		t.Errorf("a box bounded to 24 processes: %+v", res)
	}
	requireNoProcess(t, "6381", 10*time.Second)
	run(t, r, ws, "true")
}

// A validator whose request would not fit the resident box's wire (an
// environment over 64 KiB) runs as before, in a box of its own.
func TestAValidatorTooLargeForTheWireRunsInABoxOfItsOwn(t *testing.T) {
	r := boxedRunner(t)
	t.Setenv("VALIDATE_TEST_BIG", strings.Repeat("x", 70<<10))
	r.Sandbox.Env = []string{"VALIDATE_TEST_BIG"}
	res := run(t, r, t.TempDir(), `echo "big=${#VALIDATE_TEST_BIG}"`)
	if !strings.Contains(res.Output, "big=71680") {
		t.Fatalf("output: %q", res.Output)
	}
	if pids := validate.IdleBoxes(); len(pids) != 0 {
		t.Fatalf("resident boxes: %v, want none", pids)
	}
}

// Close closes the boxes idle at once, and one running a validator once
// that has run.
func TestCloseEndsABusyBoxAfterItsRun(t *testing.T) {
	r := boxedRunner(t)
	done := make(chan purser.ValidatorResult, 1)
	go func() {
		done <- r.RunValidator(context.Background(), t.TempDir(), purser.Validator{Name: "c", Run: "sleep 1.6395"})
	}()
	for end := time.Now().Add(30 * time.Second); proctest.FindProcess("1.6395") == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the validator did not start in 30 s")
		}
	}
	validate.Close()
	if res := <-done; !res.Passed {
		t.Fatalf("a run whose box was closed meanwhile: %+v", res)
	}
	validate.Close() // waits for the close under way
	if pids := validate.IdleBoxes(); len(pids) != 0 {
		t.Fatalf("a box busy at Close is kept after its run: %v", pids)
	}
}

// A workspace removed and made again at the same path runs its validators
// in a new box, which sees the new directory, not the removed one.
func TestAWorkspaceMadeAgainGetsANewBox(t *testing.T) {
	r := boxedRunner(t)
	ws := filepath.Join(t.TempDir(), "ws")
	for i, mark := range []string{"first", "second"} {
		if err := os.RemoveAll(ws); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(ws, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "mark"), []byte(mark), 0o600); err != nil {
			t.Fatal(err)
		}
		res := run(t, r, ws, "cat mark")
		if strings.TrimSpace(res.Output) != mark {
			t.Fatalf("run %d saw %q, want %q", i, res.Output, mark)
		}
	}
	oneIdleBox(t)
}
