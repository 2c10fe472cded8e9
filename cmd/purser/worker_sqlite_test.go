package main

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/sqlite"
)

// openSQLiteQueue opens the test's SQLite database, read after the workers.
func openSQLiteQueue(t *testing.T, db string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.OpenExisting(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// checkQueueLedger is checkLedger (fleet_test.go) for any app.JobStore: every
// call's ledger usage is what the sim streamed (interrupted ones no more),
// each task's total is its calls', every call the sim completed is in the
// ledger, and the run's total is its tasks'.
func checkQueueLedger(t *testing.T, s app.JobStore, taskFiles []string, dir string, output int64) fleetLedger {
	t.Helper()
	ctx := context.Background()
	l := fleetLedger{tasks: map[string]purser.TaskRecord{}, spent: map[string]int64{}}
	var err error
	if l.jobs, err = s.Jobs(ctx, "fleet"); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, f := range taskFiles {
		id := strings.TrimSuffix(f, ".yaml")
		rec, err := s.Task(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		l.tasks[id] = rec
		calls, err := s.Calls(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		usage, err := s.CallUsage(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		byCall := map[string]int64{}
		for _, u := range usage {
			byCall[u.CallID] += u.Totals.Tokens
		}
		var callsSum int64
		completed := 0
		for _, c := range calls {
			want := fleetInput + min(output, c.MaxOutputTokens)
			got := byCall[c.ID]
			callsSum += got
			switch c.Outcome {
			case purser.CallOK:
				completed++
				if got != want {
					t.Errorf("task %s call %s: ledger %d tokens, the sim streamed %d", id, c.ID, got, want)
				}
			case purser.CallInterrupted, purser.CallCancelled:
				if c.Outcome == purser.CallInterrupted {
					l.interrupted++
				}
				if got > want {
					t.Errorf("task %s call %s (%s): ledger %d tokens, more than the sim's %d", id, c.ID, c.Outcome, got, want)
				}
			case purser.CallRefused:
				if got != 0 {
					t.Errorf("task %s: refused call %s has %d tokens in the ledger", id, c.ID, got)
				}
			case "":
				t.Errorf("task %s: call %s never ended and was never marked interrupted", id, c.ID)
			}
		}
		totals, err := s.UsageTotals(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if totals.Tokens != callsSum {
			t.Errorf("task %s: total %d tokens, its calls' ledger %d", id, totals.Tokens, callsSum)
		}
		if n := completedInTranscript(t, filepath.Join(dir, id+".calls.jsonl")); n != completed {
			t.Errorf("task %s: the sim completed %d calls, the ledger has %d", id, n, completed)
		}
		l.spent[id] = totals.Tokens
		sum += totals.Tokens
	}
	run, err := s.RunUsageTotals(ctx, "fleet")
	if err != nil {
		t.Fatal(err)
	}
	if l.runTotal = run.Tokens; run.Tokens != sum {
		t.Errorf("the run's total is %d tokens, its tasks' %d", run.Tokens, sum)
	}
	return l
}

// A queue on one SQLite file, drained by three `purser worker --drain`
// processes at once (two slots each): every task ends DONE, run exactly
// once (its job finished on its first lease, one DONE said by one worker,
// the sim's two calls made once), the ledger is the sims' usage exactly,
// no job is left unfinished, and no worker met "database is locked".
func TestSQLiteQueueDrainedByWorkerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three worker processes")
	}
	bin := buildPurser(t)
	dir := t.TempDir()
	db := filepath.Join(t.TempDir(), "queue.db")
	const n = 12
	tasks := writeFleet(t, dir, n, 150, 1_000_000) // the run's cap does not bind
	submit(t, bin, dir, db, tasks)

	var workers []*workerProc
	for i := range 3 {
		workers = append(workers, startWorker(t, bin, dir, db, "w"+strconv.Itoa(i), nil,
			"--concurrency", "2", "--lease", "5s", "--poll", "100ms", "--drain"))
	}
	deadline := time.Now().Add(2 * time.Minute)
	var said strings.Builder
	for _, w := range workers {
		w.wait(t, deadline)
		out := w.out.String()
		said.WriteString(out)
		if strings.Contains(out, "locked") || strings.Contains(out, "SQLITE_BUSY") {
			t.Errorf("worker %s met a locked database:\n%s", w.name, tail(out))
		}
	}

	l := checkQueueLedger(t, openSQLiteQueue(t, db), tasks, dir, fleetOutput)
	if len(l.jobs) != n {
		t.Fatalf("%d jobs on the queue, want %d", len(l.jobs), n)
	}
	ran := map[string]int{}
	for _, j := range l.jobs {
		if j.State != purser.JobFinished || j.Outcome != string(purser.StateDone) || j.Attempts != 1 {
			t.Errorf("job %+v: want finished DONE on its first lease", j)
		}
		ran[j.Worker]++
	}
	for id, rec := range l.tasks {
		if rec.State != purser.StateDone {
			t.Errorf("task %s ended %s (%s)", id, rec.State, rec.Reason)
		}
		if c := strings.Count(said.String(), "\n"+id+": DONE"); c != 1 {
			t.Errorf("task %s was said DONE %d times by the workers", id, c)
		}
		if c := completedInTranscript(t, filepath.Join(dir, id+".calls.jsonl")); c != 2 {
			t.Errorf("task %s: the sim made %d calls, its script 2: it ran more than once", id, c)
		}
	}
	if want := int64(n * 2 * (fleetInput + fleetOutput)); l.runTotal != want {
		t.Errorf("the run's ledger holds %d tokens, the sims streamed %d", l.runTotal, want)
	}
	if len(ran) < 2 {
		t.Errorf("the jobs ran on %d worker(s): the test shows no sharing", len(ran))
	}
	t.Logf("%d tasks on 3 worker processes sharing %s: jobs per worker %v; the run spent %d tokens", n, filepath.Base(db), ran, l.runTotal)
}

// kill -9 of a worker mid-call on a SQLite queue: its two jobs go to
// another worker on the same file once their short lease runs out (by the
// local clock), the tasks are resumed and end DONE, the interrupted calls'
// streamed usage stands once and nothing the sim completed is missing.
func TestSQLiteQueueKilledWorkersJobsAreTakenOver(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	t.Parallel() // mostly waiting for a lease to run out
	bin := buildPurser(t)
	dir := t.TempDir()
	db := filepath.Join(t.TempDir(), "queue.db")
	tasks := writeFleet(t, dir, 4, 1200, 1_000_000)
	submit(t, bin, dir, db, tasks)
	const lease = "2s"
	victim := startWorker(t, bin, dir, db, "victim", nil, "--concurrency", "2", "--lease", lease, "--poll", "100ms")
	waitForWorker(t, victim, func() bool { return strings.Count(victim.out.String(), "claimed ") >= 2 })
	survivor := startWorker(t, bin, dir, db, "survivor", nil, "--concurrency", "2", "--lease", lease, "--poll", "100ms", "--drain")
	waitForWorker(t, victim, queueCallInFlight(t, openSQLiteQueue(t, db), victim))
	time.Sleep(300 * time.Millisecond) // into the call: some of its usage is streamed
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.done
	survivor.wait(t, time.Now().Add(2*time.Minute))

	l := checkQueueLedger(t, openSQLiteQueue(t, db), tasks, dir, fleetOutput)
	retried := 0
	for _, j := range l.jobs {
		if j.State != purser.JobFinished || j.Outcome != string(purser.StateDone) || j.Worker == "" {
			t.Errorf("job %+v: want finished DONE", j)
		}
		if j.Attempts > 1 {
			retried++
		}
	}
	if len(l.jobs) != 4 {
		t.Errorf("%d jobs on the queue, want 4", len(l.jobs))
	}
	for id, rec := range l.tasks {
		if rec.State != purser.StateDone {
			t.Errorf("task %s ended %s (%s)", id, rec.State, rec.Reason)
		}
	}
	if l.interrupted == 0 {
		t.Errorf("no call was marked interrupted: the victim died between calls, not mid-call")
	}
	if retried < 2 {
		t.Errorf("%d jobs were granted again; the victim died holding two", retried)
	}
	if !strings.Contains(survivor.out.String(), "attempt 2") {
		t.Errorf("the survivor never took over a job:\n%s", tail(survivor.out.String()))
	}
	t.Logf("%d jobs taken over after a %s lease, %d calls interrupted; the run spent %d tokens", retried, lease, l.interrupted, l.runTotal)
}

// queueCallInFlight reports whether a call of a task the worker claimed is
// in flight, on either store (callInFlight, fleet_test.go, opens PostgreSQL).
func queueCallInFlight(t *testing.T, s app.JobStore, w *workerProc) func() bool {
	t.Helper()
	return func() bool {
		for _, line := range strings.Split(w.out.String(), "\n") {
			id, ok := strings.CutPrefix(line, "claimed ")
			if !ok {
				continue
			}
			id, _, _ = strings.Cut(id, " ")
			calls, err := s.Calls(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range calls {
				if c.Outcome == "" && c.EndedAt.IsZero() {
					return true
				}
			}
		}
		return false
	}
}

// submit refuses a SQLite database inside a task's workspace, as purser run
// does: an agent there could rewrite the ledger that enforces its budget.
func TestSubmitRefusesASQLiteQueueInAWorkspace(t *testing.T) {
	bin := buildPurser(t)
	dir := t.TempDir()
	tasks := writeFleet(t, dir, 1, 0, 1_000_000)
	db := filepath.Join(dir, "ws-t00", "queue.db")
	cmd := exec.Command(bin, append([]string{"submit", "--db", db, "--run", "fleet"}, tasks...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitBadInput || !strings.Contains(string(out), "holds the database") {
		t.Fatalf("submit to a database in a workspace: %v\n%s", err, out)
	}
}

// A task file rewritten after it was submitted so that its workspace holds
// the SQLite queue: the worker refuses to run it (an agent there could
// rewrite the ledger), the task and its job end FAILED saying why, and no
// call is made.
func TestWorkerRefusesATaskWhoseWorkspaceNowHoldsTheQueue(t *testing.T) {
	bin := buildPurser(t)
	dir := t.TempDir()
	tasks := writeFleet(t, dir, 1, 0, 1_000_000)
	db := filepath.Join(dir, "state", "queue.db")
	submit(t, bin, dir, db, tasks)
	writeFiles(t, dir, map[string]string{"t00.yaml": "id: t00\ngoal: Fix it.\nworkspace: ./state\n" +
		"backend: {type: sim, script: sim.yaml, transcript: t00.calls.jsonl}\n" +
		"validators: [{name: fixed, run: 'test -f fixed.txt'}]\nbudget: {hard: {maxIterations: 5}}\n"})
	w := startWorker(t, bin, dir, db, "w", nil, "--lease", "5s", "--poll", "100ms", "--drain")
	w.wait(t, time.Now().Add(time.Minute))
	s := openSQLiteQueue(t, db)
	jobs, err := s.Jobs(context.Background(), "fleet")
	if err != nil || len(jobs) != 1 || jobs[0].State != purser.JobFinished || jobs[0].Outcome != string(purser.StateFailed) {
		t.Fatalf("jobs %+v (%v), want t00 finished FAILED\n%s", jobs, err, tail(w.out.String()))
	}
	rec, err := s.Task(context.Background(), "t00")
	if err != nil || rec.State != purser.StateFailed || !strings.Contains(rec.Reason, "holds the database") {
		t.Fatalf("task %+v (%v), want FAILED: its workspace holds the database", rec, err)
	}
	if n := completedInTranscript(t, filepath.Join(dir, "t00.calls.jsonl")); n != 0 {
		t.Fatalf("the sim made %d calls in a workspace holding the ledger", n)
	}
}
