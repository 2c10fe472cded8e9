package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/sqlite"
)

// A purser killed with kill -9 mid-call leaves its hold on the shared run:
// the whole of the run's 5,000-token cap, which would lapse only after the
// call timeout and a minute (31 minutes). purser resume finds the task's
// owner dead, drops the hold, says how much it released, and the resumed
// task's call is admitted: the task ends DONE well inside the test's own
// bound (90 s), which a resume waiting for the hold to lapse could not.
func TestResumeAfterKill9DropsTheDeadProcessHold(t *testing.T) {
	bin := buildPurser(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "p.db")
	write := func(name, body string) {
		t.Helper()
		path := filepath.Join(dir, name)
		must(t, os.MkdirAll(filepath.Dir(path), 0o755))
		must(t, os.WriteFile(path, []byte(body), 0o600))
	}
	write("run.yaml", "hard: {tokens: 5000, maxIterations: 100}\n")
	write("task.yaml", "id: held\ngoal: Pass.\nworkspace: ./ws\nbackend: {type: sim, script: sim.yaml}\n"+
		"validators: [{name: ok, run: 'test -f done'}]\nbudget: {hard: {maxIterations: 5}}\n")
	write("ws/README", "x\n")
	unboxWhereNoBox(t, dir)
	// A call that outlasts any machine's pace: it is killed in flight.
	write("sim.yaml", "steps:\n  - usage: {inputTokens: 100}\n    delayMs: 600000\n")

	cmd := exec.Command(bin, "run", "task.yaml", "--run", "shared", "--run-budget", "run.yaml", "--json", "--db", db)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PURSER_DB=")
	must(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })

	ctx := context.Background()
	caps := budget.Amount{USD: budget.UnlimitedUSD, Tokens: 5000}
	held := func() bool {
		s, err := sqlite.OpenExisting(ctx, db)
		if err != nil {
			return false
		}
		defer s.Close()
		avail, err := s.RunAvailable(ctx, "shared", caps)
		return err == nil && avail.Tokens < minResumeCall
	}
	deadline := time.Now().Add(60 * time.Second)
	for !held() {
		if time.Now().After(deadline) {
			t.Fatal("the first purser never held the run's budget for its call")
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, cmd.Process.Kill()) // SIGKILL: nothing released, nothing recorded
	<-exited
	if !held() {
		t.Fatal("the killed purser's hold is gone already: the test proves nothing")
	}

	// The resumed task's call is quick and lands the fix.
	write("sim.yaml", "steps:\n  - usage: {inputTokens: 100, outputTokens: 10}\n    files: {done: \"yes\"}\n")
	code, out := purserIn(t, bin, dir, "resume", "held", "--json", "--db", db)
	if code != 0 {
		t.Fatalf("resume: exit %d, want 0 (DONE)\n%s", code, out)
	}
	if !strings.Contains(out, "released 1 hold(s) of ") || !strings.Contains(out, "on run shared") {
		t.Fatalf("the resume did not say it released the dead process's hold on run shared:\n%s", out)
	}
	s, err := sqlite.OpenExisting(ctx, db)
	must(t, err)
	defer s.Close()
	rec, err := s.Task(ctx, "held")
	must(t, err)
	if rec.State != purser.StateDone {
		t.Fatalf("task %s, want DONE (%s)", rec.State, rec.Reason)
	}
}

// minResumeCall is less than the least call the resumed task could make
// (its prompt and 256 output tokens): a run with this little left admits
// no call of it.
const minResumeCall = 256
