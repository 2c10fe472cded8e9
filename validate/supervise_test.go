package validate_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/internal/procgroup"
	"github.com/purser-dev/purser/internal/proctest"
	"github.com/purser-dev/purser/validate"
)

// ownerEnv makes the test binary play Purser running one boxed validator
// (playOwner), with supervision on as purser has it; its value is the
// validator's script.
const ownerEnv = "VALIDATE_TEST_OWNER_RUN"

// playOwner runs the validator ownerEnv names, boxed, and exits when it
// ends (a test kills it before that).
func playOwner() int {
	procgroup.Supervise()
	homes, err := os.MkdirTemp("", "validate-owner-")
	if err != nil {
		return 1
	}
	defer os.RemoveAll(homes)
	r := validate.Runner{Sandbox: &validate.Sandbox{Homes: homes}}
	ws := filepath.Join(homes, "ws")
	r.Sandbox.Homes = filepath.Join(homes, "homes")
	if err := os.Mkdir(ws, 0o700); err != nil {
		return 1
	}
	res := r.RunValidator(context.Background(), ws, purser.Validator{Name: "owned", Run: os.Getenv(ownerEnv)})
	fmt.Println(res.Output)
	return 0
}

// A boxed validator runs as the box alone: bwrap is Purser's own child,
// with no supervisor between them, even with supervision on (the box's pid
// namespace and --die-with-parent are what a supervisor would add; issue
// 24). Under a supervisor, the child would be this binary run with
// procgroup.SupervisorArg.
func TestBoxedValidatorRunsWithoutASupervisor(t *testing.T) {
	requireBox(t)
	procgroup.Supervise()
	defer procgroup.DisableSupervision()
	r := validate.Runner{Sandbox: &validate.Sandbox{Homes: t.TempDir()}}
	arg := proctest.UniqueArg()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan purser.ValidatorResult, 1)
	go func() {
		done <- r.RunValidator(ctx, t.TempDir(), purser.Validator{Name: "waits", Run: "sleep " + arg})
	}()
	var argv [][]byte
	for end := time.Now().Add(30 * time.Second); len(argv) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			cancel()
			t.Fatal("the validator did not start in 30 s")
		}
		for _, pid := range childrenOfSelf() {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			if err == nil && treeRuns(pid, "sleep "+arg) {
				argv = bytes.Split(bytes.TrimSuffix(b, []byte{0}), []byte{0})
			}
		}
	}
	cancel()
	if res := <-done; res.Passed {
		t.Errorf("a cancelled validator passed: %+v", res)
	}
	if filepath.Base(string(argv[0])) != "bwrap" || bytes.Contains(bytes.Join(argv, []byte(" ")), []byte(procgroup.SupervisorArg)) {
		t.Errorf("the boxed validator's process is %q…, not bwrap itself", argv[:min(2, len(argv))])
	}
	requireNoProcess(t, arg, 10*time.Second)
}

// treeRuns reports whether pid or a process below it has cmd in its
// command line (a resident box runs its validators below it, not as its
// own command).
func treeRuns(pid int, cmd string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err == nil && bytes.Contains(b, []byte(cmd)) {
		return true
	}
	for _, child := range childrenOf(strconv.Itoa(pid)) {
		if treeRuns(child, cmd) {
			return true
		}
	}
	return false
}

// childrenOfSelf lists this process's children, those of every thread.
func childrenOfSelf() []int { return childrenOf("self") }

// childrenOf lists the children of the process pid ("self": this one),
// those of every thread.
func childrenOf(pid string) []int {
	tasks, _ := os.ReadDir("/proc/" + pid + "/task")
	var out []int
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/" + pid + "/task/" + task.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// Without a supervisor, a boxed validator still never outlives a Purser
// killed with SIGKILL, and neither does what it forked — a setsid double
// fork included: the box's pid namespace ends with bwrap, which dies with
// Purser (issue 11's guarantee, for the boxed path of issue 24).
func TestBoxedValidatorDiesWithAKilledPurser(t *testing.T) {
	requireBox(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	forked, direct := proctest.UniqueArg(), proctest.UniqueArg()
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
	if err := owner.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = owner.Wait()
	requireNoProcess(t, forked, 10*time.Second)
	requireNoProcess(t, direct, 10*time.Second)
}
