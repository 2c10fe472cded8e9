package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func signalFixture(t *testing.T, validator string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"task.yaml": "id: slow\ngoal: Take a while.\nworkspace: ./ws\nbackend: {type: sim, script: sim.yaml, transcript: calls.jsonl}\n" +
			"validators:\n  - name: check\n    run: '" + validator + "'\nbudget:\n  hard: {usd: 100, maxIterations: 5}\n",
		// A call long enough that a signal always lands in it, however
		// slow the machine: the test waits for its first usage, not a time.
		"sim.yaml":  "steps:\n  - usage: {inputTokens: 50000, costUsd: 5.0}\n    delayMs: 30000\n",
		"ws/README": "x\n",
		// The validator's process is watched from outside (its pid, its
		// group): it runs unboxed, as these tests were written for.
		"purser.yaml": "sandbox: off\n",
	}
	writeFiles(t, dir, files)
	return dir
}

// purserProcess is a purser started by a test, with its stderr.
type purserProcess struct {
	*exec.Cmd
	stderr *syncBuffer
}

func startPurser(t *testing.T, bin, dir string, args ...string) purserProcess {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PURSER_DB="+filepath.Join(dir, "p.db"))
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A test that fails half-way leaves no purser running.
	t.Cleanup(func() { cmd.Process.Kill() })
	return purserProcess{cmd, stderr}
}

// syncBuffer is a bytes.Buffer that a process writes while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond until it holds, and fails the test if it does not
// within timeout. Tests wait on what they need to have happened, never on a
// fixed sleep, so a slow or loaded machine makes them slower, not flaky.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// usedTokens reads the task's ledger through `purser status`; found is false
// while the task is not in the database yet.
func usedTokens(bin, dir string) (tokens int64, found bool) {
	out, err := exec.Command(bin, "status", "slow", "--json", "--db", filepath.Join(dir, "p.db")).Output()
	if err != nil {
		return 0, false
	}
	var st struct {
		Tasks []struct {
			Budget struct {
				UsedTokens int64 `json:"usedTokens"`
			}
		}
	}
	if json.Unmarshal(out, &st) != nil || len(st.Tasks) != 1 {
		return 0, false
	}
	return st.Tasks[0].Budget.UsedTokens, true
}

// validatorPID waits for the validator of signalValidator to start, and
// returns the pid of its shell, the leader of its process group. The
// group is killed when the test ends, whatever purser did to it.
func validatorPID(t *testing.T, dir string) int {
	t.Helper()
	var pid int
	waitFor(t, time.Minute, "the validator to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "ws", "validator.pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) })
	return pid
}

// processAlive is false for a process that is gone or a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// signalValidator runs until killed: it ignores SIGTERM, and says when it
// has started by writing its pid.
const signalValidator = `echo $$ > validator.pid; trap "" TERM; while true; do sleep 0.1; done`

// interruptDuringStubbornValidator starts a run whose one call ends at
// once and whose validator ignores SIGTERM (signalValidator), waits for the
// validator to start, and sends purser a first SIGINT. It returns the run's
// directory, the purser process and the validator's pid.
func interruptDuringStubbornValidator(t *testing.T, bin string) (dir string, cmd purserProcess, validator int) {
	t.Helper()
	dir = signalFixture(t, signalValidator)
	if err := os.WriteFile(filepath.Join(dir, "sim.yaml"), []byte("steps:\n  - usage: {inputTokens: 10, costUsd: 0.01}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = startPurser(t, bin, dir, "run", "task.yaml")
	validator = validatorPID(t, dir)
	cmd.Process.Signal(syscall.SIGINT)
	return dir, cmd, validator
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatal(err)
	}
	return ee.ExitCode()
}

func taskState(t *testing.T, bin, dir string) (state string, tokens int64) {
	t.Helper()
	out, err := exec.Command(bin, "status", "slow", "--json", "--db", filepath.Join(dir, "p.db")).Output()
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Tasks []struct {
			Status string
			Budget struct {
				UsedTokens int64 `json:"usedTokens"`
			}
		}
	}
	if err := json.Unmarshal(out, &st); err != nil || len(st.Tasks) != 1 {
		t.Fatalf("status: %v %s", err, out)
	}
	return st.Tasks[0].Status, st.Tasks[0].Budget.UsedTokens
}

// SIGINT or SIGTERM mid-call: the call is cancelled, what it used so far is
// recorded, the artifacts are written, and the task is left resumable (not
// BLOCKED), with exit code 130.
func TestGracefulStopOnSignal(t *testing.T) {
	t.Parallel()
	bin := buildPurser(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			dir := signalFixture(t, "exit 1")
			cmd := startPurser(t, bin, dir, "run", "task.yaml")
			waitFor(t, time.Minute, "the call's first usage in the ledger", func() bool {
				tokens, found := usedTokens(bin, dir)
				return found && tokens > 0
			})
			sent := time.Now()
			cmd.Process.Signal(sig)
			if code := exitCode(t, cmd.Wait()); code != exitInterrupted {
				t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, cmd.stderr)
			}
			t.Logf("from the signal to exit, the call cancelled and the artifacts written: %s", time.Since(sent).Round(time.Millisecond))
			// The 30 s call was cut, not waited for: the ledger holds only
			// what streamed before the signal, and the sim says so.
			state, tokens := taskState(t, bin, dir)
			if state != "PENDING" || tokens <= 0 || tokens >= 50000 {
				t.Fatalf("state %s with %d tokens: want PENDING with the part streamed before the signal", state, tokens)
			}
			status, err := os.ReadFile(filepath.Join(dir, "ws", "STATUS.md"))
			if err != nil || !strings.Contains(string(status), "interrupted; resumable") {
				t.Fatalf("STATUS.md: %v\n%s", err, status)
			}
			calls, _ := os.ReadFile(filepath.Join(dir, "calls.jsonl"))
			if !strings.Contains(string(calls), `"cancelled":true`) {
				t.Fatalf("the call was not cancelled: %s", calls)
			}
		})
	}
}

// A second signal exits at once, even while the first is still waiting for
// a validator that ignores SIGTERM (to kill it after validate.KillGrace):
// purser quits before the graceful stop's end, and kills the validator's
// group as it goes, so nothing it started outlives it.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	bin := buildPurser(t)
	dir, cmd, validator := interruptDuringStubbornValidator(t, bin)
	waitFor(t, time.Minute, "purser to report the first signal", func() bool {
		return strings.Contains(cmd.stderr.String(), "stopping;")
	})
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	if code := exitCode(t, cmd.Wait()); code != exitInterrupted {
		t.Fatalf("exit %d after the second signal, want %d\n%s", code, exitInterrupted, cmd.stderr)
	}
	t.Logf("from the second signal to exit: %s", time.Since(sent).Round(time.Millisecond))
	// The graceful stop ends by writing STATUS.md once the validator is
	// killed; a purser that quit at the second signal never got there.
	if _, err := os.Stat(filepath.Join(dir, "ws", "STATUS.md")); err == nil {
		t.Fatalf("STATUS.md was written: purser finished the graceful stop instead of quitting at the second signal\n%s", cmd.stderr)
	}
	// Quitting at once takes the validator with it: nothing is left running.
	waitFor(t, 10*time.Second, "the validator to be gone with purser", func() bool { return !processAlive(validator) })
}

// Without the second signal, the same stop waits for the stubborn validator
// to be killed: the second signal is what makes the exit immediate.
func TestFirstSignalAloneWaitsForTheValidator(t *testing.T) {
	t.Parallel()
	bin := buildPurser(t)
	dir, cmd, validator := interruptDuringStubbornValidator(t, bin)
	if code := exitCode(t, cmd.Wait()); code != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, cmd.stderr)
	}
	// It ignores SIGTERM and loops for ever: only purser's kill ends it.
	waitFor(t, 30*time.Second, "the validator purser killed to be gone", func() bool { return !processAlive(validator) })
	if state, _ := taskState(t, bin, dir); state != "PENDING" {
		t.Fatalf("state %s", state)
	}
}
