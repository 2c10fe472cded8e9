package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser/budget"
)

// The usage of every sim call in the crash harness: 1,200 tokens and $0.05,
// streamed in 10 ms parts over 120 ms.
const (
	crashCallTokens = 1200
	crashCallUSD    = "0.05"
)

func crashFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"task.yaml": "id: crash\ngoal: Survive.\nworkspace: ./ws\nbackend: {type: sim, script: sim.yaml, transcript: calls.jsonl}\n" +
			"validators:\n  - name: fixed\n    run: test -f fixed\nbudget:\n  hard: {usd: 100, maxIterations: 100}\n",
		// The fix lands on the sixth call of a process (the sim restarts its
		// script in each process, as a fresh agent would).
		"sim.yaml": strings.Repeat("  - usage: {inputTokens: 1000, outputTokens: 200, costUsd: 0.05}\n    delayMs: 120\n", 5) +
			"  - usage: {inputTokens: 1000, outputTokens: 200, costUsd: 0.05}\n    delayMs: 120\n    files: {fixed: \"yes\"}\n",
		"ws/README": "x\n",
	}
	files["sim.yaml"] = "steps:\n" + files["sim.yaml"]
	writeFiles(t, dir, files)
	return dir
}

type crashStatus struct {
	Status      string
	Interrupted bool
	Budget      struct {
		UsedTokens int64   `json:"usedTokens"`
		UsedUSD    float64 `json:"usedUsd"`
	}
}

// crashState reads the task's status; found is false when the process was
// killed before it recorded the task at all.
func crashState(t *testing.T, bin, dir string) (st crashStatus, found bool) {
	t.Helper()
	out, err := exec.Command(bin, "status", "crash", "--json", "--db", filepath.Join(dir, "p.db")).Output()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == exitBadInput {
		return crashStatus{}, false
	}
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	var all struct{ Tasks []crashStatus }
	if err := json.Unmarshal(out, &all); err != nil || len(all.Tasks) != 1 {
		t.Fatalf("status: %v %s", err, out)
	}
	return all.Tasks[0], true
}

// completedCalls counts the calls the sim finished (it writes a transcript
// line when a call ends; a call cut by SIGKILL writes none).
func completedCalls(t *testing.T, dir string) int64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "calls.jsonl"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), `"cancelled":true`) {
			n++
		}
	}
	return n
}

// TestCrashSafety kills `purser run` with SIGKILL at a random moment, then
// resumes it, many times over (seeded; PURSER_CRASH_TRIALS sets how many,
// 12 by default, 50 or more for the long campaign). After each trial: the
// interrupted task shows as such; the ledger holds exactly what the sim
// transcript says was spent, plus at most the one call cut mid-way, which is
// recorded as interrupted; the task ends DONE with its artifacts rewritten.
// The trials are independent and run in parallel; one fails alone, by name
// (-run 'TestCrashSafety/trial-07' repeats it).
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash campaign is not short")
	}
	t.Parallel()
	trials := 12
	if n, err := strconv.Atoi(os.Getenv("PURSER_CRASH_TRIALS")); err == nil && n > 0 {
		trials = n
	}
	bin := buildPurser(t)
	var mu sync.Mutex
	outcomes := map[crashOutcome]int{}
	t.Run("trials", func(t *testing.T) {
		for trial := range trials {
			t.Run(fmt.Sprintf("trial-%02d", trial), func(t *testing.T) {
				t.Parallel()
				o := crashTrial(t, bin, trial)
				mu.Lock()
				outcomes[o]++
				mu.Unlock()
			})
		}
	})
	t.Logf("%d kill trials survived: %d cut a call mid-way (its partial usage kept, recorded as interrupted), %d between calls, %d before the task was recorded, %d after it was done",
		trials, outcomes[killedMidCall], outcomes[killedBetweenCalls], outcomes[killedEarly], outcomes[killedAfterDone])
}

// crashOutcome is where a kill landed.
type crashOutcome int

const (
	killedEarly crashOutcome = iota // before the task was recorded
	killedMidCall
	killedBetweenCalls
	killedAfterDone
)

// firstOutput closes started when the process first writes.
type firstOutput struct {
	once    sync.Once
	started chan struct{}
}

func (w *firstOutput) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	return len(p), nil
}

// crashTrial is one kill, resume and check of the campaign.
func crashTrial(t *testing.T, bin string, trial int) crashOutcome {
	rng := rand.New(rand.NewPCG(uint64(trial), 2026))
	perCallUSD, _ := budget.ParseUSD(crashCallUSD)
	dir := crashFixture(t)
	env := append(os.Environ(), "PURSER_DB="+filepath.Join(dir, "p.db"))
	cmd := exec.Command(bin, "run", "task.yaml")
	cmd.Dir, cmd.Env = dir, env
	out := &firstOutput{started: make(chan struct{})}
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The kill comes at a random moment (sleeping is the point here, not a
	// wait for something to happen). One trial in four counts it from the
	// process's start, so it may land before the task is even recorded; the
	// others from the task's first line of output ("iteration 1 starts"),
	// so that on a slow machine they still land in the task's work: six
	// calls of 120 ms, each followed by a validator.
	var killAt time.Duration
	if rng.IntN(4) == 0 {
		killAt = time.Duration(rng.IntN(300)) * time.Millisecond
	} else {
		select {
		case <-out.started:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			t.Fatal("purser run wrote nothing in a minute")
		}
		killAt = time.Duration(rng.IntN(1000)) * time.Millisecond
	}
	time.Sleep(killAt)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	st, found := crashState(t, bin, dir)
	if !found {
		// Killed before it recorded anything: nothing may have been spent.
		if n := completedCalls(t, dir); n != 0 {
			t.Fatalf("kill at %s: the task is not in the database, but %d calls completed", killAt, n)
		}
		run := exec.Command(bin, "run", "task.yaml")
		run.Dir, run.Env = dir, env
		if out, err := run.CombinedOutput(); err != nil {
			t.Fatalf("run again: %v\n%s", err, out)
		}
		if final, _ := crashState(t, bin, dir); final.Status != "DONE" {
			t.Fatalf("after running again %+v", final)
		}
		return killedEarly
	}
	if st.Status == "RUNNING" && !st.Interrupted {
		t.Fatalf("kill at %s: a killed run shows as RUNNING, not interrupted", killAt)
	}
	// The ledger against the transcript, right after the kill.
	n := completedCalls(t, dir)
	excess := st.Budget.UsedTokens - n*crashCallTokens
	if excess < 0 || excess > crashCallTokens {
		t.Fatalf("kill at %s: ledger %d tokens, transcript %d calls × %d: lost usage, or more than one cut call",
			killAt, st.Budget.UsedTokens, n, crashCallTokens)
	}
	wantUSD := float64(n) * perCallUSD.Float()
	if st.Budget.UsedUSD < wantUSD-1e-9 || st.Budget.UsedUSD > wantUSD+perCallUSD.Float()+1e-9 {
		t.Fatalf("kill at %s: ledger $%f, transcript $%f", killAt, st.Budget.UsedUSD, wantUSD)
	}
	outcome := killedBetweenCalls
	if st.Status == "DONE" {
		outcome = killedAfterDone
	}

	// Resume to the end.
	if st.Status != "DONE" {
		res := exec.Command(bin, "resume", "crash")
		res.Dir, res.Env = dir, env
		if out, err := res.CombinedOutput(); err != nil {
			t.Fatalf("resume: %v\n%s", err, out)
		}
	}
	final, _ := crashState(t, bin, dir)
	if final.Status != "DONE" || final.Interrupted {
		t.Fatalf("after resume %+v", final)
	}
	n = completedCalls(t, dir)
	excess = final.Budget.UsedTokens - n*crashCallTokens
	if excess < 0 || excess > crashCallTokens {
		t.Fatalf("after resume ledger %d tokens, transcript %d calls", final.Budget.UsedTokens, n)
	}
	budgetMD, err := os.ReadFile(filepath.Join(dir, "ws", "BUDGET.md"))
	if err != nil {
		t.Fatal(err)
	}
	status, _ := os.ReadFile(filepath.Join(dir, "ws", "STATUS.md"))
	if !strings.Contains(string(status), "**DONE**") || !strings.Contains(string(budgetMD), "State: **DONE**") {
		t.Fatal("artifacts not rewritten after resume")
	}
	if excess > 0 {
		if !strings.Contains(string(budgetMD), "| interrupted |") {
			t.Fatalf("%d tokens of a call cut mid-way, but no call recorded as interrupted:\n%s", excess, budgetMD)
		}
		return killedMidCall
	}
	return outcome
}
