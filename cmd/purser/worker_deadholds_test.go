package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser"
)

// Issue 22 item 14, its deterministic repro: two workers with one slot each
// on one SQLite queue; the first's call on t00 holds nearly all of the
// run's 8,500-token cap, the second's call on t01 does not fit beside it
// and waits. The first is killed: its holds must go with it (its process is
// gone), not after their TTL (the call's timeout and a minute: 31 minutes),
// so the second runs t01, then takes over t00 once its lease runs out, and
// both end DONE well inside the deadline.
func TestKilledWorkersHoldsDoNotStallTheFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	t.Parallel() // mostly waiting for a call and a lease
	bin := buildPurser(t)
	dir := t.TempDir()
	db := filepath.Join(t.TempDir(), "queue.db")
	// Each call streams 110 tokens over 3 s but is admitted for its input
	// and the reserved 8,192 tokens of output.
	tasks := writeFleetOf(t, dir, 2, 3000, 100, 8500)
	submit(t, bin, dir, db, tasks)
	const lease = "2s"
	victim := startWorker(t, bin, dir, db, "victim", nil, "--concurrency", "1", "--lease", lease, "--poll", "100ms")
	waitForWorker(t, victim, func() bool { return strings.Contains(victim.out.String(), "claimed t00") })
	waitForWorker(t, victim, queueCallInFlight(t, openSQLiteQueue(t, db), victim))
	survivor := startWorker(t, bin, dir, db, "survivor", nil, "--concurrency", "1", "--lease", lease, "--poll", "100ms", "--drain")
	waitForWorker(t, survivor, func() bool { return strings.Contains(survivor.out.String(), "claimed t01") })
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.done
	// 31 minutes without the fix; seconds with it.
	survivor.wait(t, time.Now().Add(2*time.Minute))

	out := survivor.out.String()
	l := checkQueueLedger(t, openSQLiteQueue(t, db), tasks, dir, 100)
	for id, rec := range l.tasks {
		if rec.State != purser.StateDone {
			t.Errorf("task %s ended %s (%s)\n%s", id, rec.State, rec.Reason, tail(out))
		}
	}
	if !strings.Contains(out, "its process is gone") {
		t.Errorf("the survivor never said it released the killed worker's holds:\n%s", tail(out))
	}
	if l.runTotal > 8500 {
		t.Errorf("the run spent %d tokens, over its cap of 8500", l.runTotal)
	}
}
