package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildPurser builds the real binary once for the signal tests.
func buildPurser(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "purser")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func signalFixture(t *testing.T, validator string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"task.yaml": "id: slow\ngoal: Take a while.\nworkspace: ./ws\nbackend: {type: sim, script: sim.yaml, transcript: calls.jsonl}\n" +
			"validators:\n  - name: check\n    run: '" + validator + "'\nbudget:\n  hard: {usd: 100, maxIterations: 5}\n",
		"sim.yaml":  "steps:\n  - usage: {inputTokens: 50000, costUsd: 5.0}\n    delayMs: 3000\n",
		"ws/README": "x\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func startPurser(t *testing.T, bin, dir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PURSER_DB="+filepath.Join(dir, "p.db"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
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
	bin := buildPurser(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := signalFixture(t, "exit 1")
			cmd := startPurser(t, bin, dir, "run", "task.yaml")
			time.Sleep(1200 * time.Millisecond) // mid-call: usage is streaming
			start := time.Now()
			cmd.Process.Signal(sig)
			code := exitCode(t, cmd.Wait())
			if code != exitInterrupted || time.Since(start) > 3*time.Second {
				t.Fatalf("exit %d after %s, want %d promptly", code, time.Since(start), exitInterrupted)
			}
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
// a validator that ignores SIGTERM.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	bin := buildPurser(t)
	dir := signalFixture(t, stubbornValidator)
	if err := os.WriteFile(filepath.Join(dir, "sim.yaml"), []byte("steps:\n  - usage: {inputTokens: 10}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := startPurser(t, bin, dir, "run", "task.yaml")
	waitTrapped(t, dir)
	cmd.Process.Signal(syscall.SIGINT)
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	code := exitCode(t, cmd.Wait())
	if code != exitInterrupted || time.Since(start) > time.Second {
		t.Fatalf("exit %d %s after the second signal, want %d at once", code, time.Since(start), exitInterrupted)
	}
}

// Without the second signal, the same stop waits for the stubborn validator
// to be killed: the second signal is what makes the exit immediate.
func TestFirstSignalAloneWaitsForTheValidator(t *testing.T) {
	bin := buildPurser(t)
	dir := signalFixture(t, stubbornValidator)
	if err := os.WriteFile(filepath.Join(dir, "sim.yaml"), []byte("steps:\n  - usage: {inputTokens: 10}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := startPurser(t, bin, dir, "run", "task.yaml")
	waitTrapped(t, dir)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	code := exitCode(t, cmd.Wait())
	if code != exitInterrupted || time.Since(start) < time.Second {
		t.Fatalf("exit %d after %s: want %d, after the validator's kill grace", code, time.Since(start), exitInterrupted)
	}
	if state, _ := taskState(t, bin, dir); state != "PENDING" {
		t.Fatalf("state %s", state)
	}
}

// stubbornValidator ignores SIGTERM, and says so by a file once it does.
const stubbornValidator = "trap \"\" TERM; touch trapped; while true; do sleep 0.1; done"

// waitTrapped waits until the stubborn validator runs with its trap set: a
// fixed sleep is not enough on a loaded machine.
func waitTrapped(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "ws", "trapped")); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the validator did not start within 60 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
