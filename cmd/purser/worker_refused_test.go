package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A draining worker whose only job is a task the engine refuses (purser run
// runs it, in a live process) gives the job back, says so, and exits
// non-zero naming it once only refused jobs are left, rather than come
// round to it again and again forever (issue 23 #18).
func TestDrainingWorkerExitsWhenOnlyRefusedJobsAreLeft(t *testing.T) {
	bin := buildPurser(t)
	dir := signalFixture(t, "true")
	db := filepath.Join(dir, "p.db")
	runner := startPurser(t, bin, dir, "run", "task.yaml")
	waitFor(t, time.Minute, "purser run to be in its call", func() bool {
		tokens, found := usedTokens(bin, dir)
		return found && tokens > 0
	})
	if code, out := purserIn(t, bin, dir, "submit", "--db", db, "--run", "q", "task.yaml"); code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}

	// Bounded: a worker that never exits fails here, not at the test's
	// timeout. The bound is far past what the worker needs (one claim, one
	// refusal, one look at the queue), however loaded the machine.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "worker", "--db", db, "--drain", "--poll", "100ms")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PURSER_DB=")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("worker --drain still running after %s with only a refused job queued:\n%s", 60*time.Second, out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure {
		t.Fatalf("worker --drain: %v, want exit %d:\n%s", err, exitFailure, out)
	}
	for _, want := range []string{"slow: refused, given back to the queue", "only refused jobs are left on the queue, still queued: slow ("} {
		if !strings.Contains(string(out), want) {
			t.Errorf("worker output lacks %q:\n%s", want, out)
		}
	}
	runner.Process.Kill()
	runner.Wait()
}
