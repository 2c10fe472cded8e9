package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/report"
	"github.com/purser-dev/purser/validate"
)

// addTask makes another task on the fixture's store and script, with a
// workspace and a transcript of its own.
func (f *fixture) addTask(id string) purser.Task {
	f.t.Helper()
	ws := filepath.Join(f.dir, "ws-"+id)
	must(f.t, os.MkdirAll(filepath.Join(ws, "src"), 0o755))
	for _, name := range []string{"check.sh", "src/parser.go"} {
		b, err := os.ReadFile(filepath.Join(f.workspace, name))
		must(f.t, err)
		write(f.t, filepath.Join(ws, name), string(b))
	}
	t := f.task
	t.ID, t.Workspace = id, ws
	t.Backend.Options = map[string]any{"script": "sim.yaml", "transcript": "calls-" + id + ".jsonl"}
	return t
}

// Tasks run at once on one engine (purser run --parallel N): the engine's
// configuration is shared, read-only, and the run is race-free (this test is
// meaningful under -race).
func TestSeveralTasksOnOneEngine(t *testing.T) {
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100, outputTokens: 50, costUsd: 0.01}\n    files: {src/fixed: yes}\n    delayMs: 20\n")
	var tasks []purser.Task
	for _, id := range []string{"a", "b", "c", "d"} {
		tasks = append(tasks, f.addTask(id))
	}
	outcomes, err := f.engine().RunBatch(context.Background(), engine.Batch{Tasks: tasks, Parallel: 4,
		Budget: &budget.Config{Hard: budget.HardLimits{USD: usd("1"), MaxIterations: ptr(100)}}})
	must(t, err)
	for _, o := range outcomes {
		if o.Err != nil || o.Skipped {
			t.Errorf("task %s: err %v, skipped %v; want DONE", o.Task.ID, o.Err, o.Skipped)
		}
		rec, err := f.store.Task(context.Background(), o.Task.ID)
		must(t, err)
		if rec.State != purser.StateDone {
			t.Errorf("task %s is %s in the store, want DONE", o.Task.ID, rec.State)
		}
	}
}

func TestNewRefusesAConfigMissingARequiredField(t *testing.T) {
	cb, err := contextbuild.New()
	must(t, err)
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 1}\n")
	full := f.cfg
	cases := []struct {
		name  string
		edit  func(*engine.Config)
		field string
	}{
		{"no store", func(c *engine.Config) { c.Store = nil }, "Store"},
		{"no backends", func(c *engine.Config) { c.Backends = nil }, "Backends"},
		{"no validators", func(c *engine.Config) { c.Validators = nil }, "Validators"},
		{"no context builder", func(c *engine.Config) { c.Context = nil }, "Context"},
		{"no artifact renderer", func(c *engine.Config) { c.Artifacts = nil }, "Artifacts"},
		{"negative retry base", func(c *engine.Config) { c.Retry.Base = -time.Second }, "Retry.Base"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := full
			cfg.Context = cb
			c.edit(&cfg)
			_, err := engine.New(cfg)
			if err == nil || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("New: %v, want an error naming %s", err, c.field)
			}
		})
	}
	if _, err := engine.New(engine.Config{Store: f.store, Backends: f.cfg.Backends, Validators: validate.Runner{}, Context: cb, Artifacts: report.Artifacts{}}); err != nil {
		t.Fatalf("New with only the required fields: %v", err)
	}
}

func TestWithDefaultsReturnsACopy(t *testing.T) {
	var cfg engine.Config
	d := cfg.WithDefaults()
	if cfg.Clock != nil || cfg.Logger != nil || cfg.Prices != nil || cfg.Retry != (engine.RetryPolicy{}) {
		t.Fatalf("WithDefaults changed its receiver: %+v", cfg)
	}
	if d.Clock == nil || d.Logger == nil || d.Prices == nil || d.Retry != engine.DefaultRetry || d.ReserveOutputTokens != engine.DefaultReserveOutputTokens || d.Owners == nil {
		t.Fatalf("WithDefaults left a default unset: %+v", d)
	}
	if got := (engine.Config{Retry: engine.RetryPolicy{Max: -1}}).WithDefaults().Retry.Max; got != 0 {
		t.Fatalf("Retry.Max -1 gives %d retries, want 0", got)
	}
}

// Ctrl+C with queued tasks: the task running is left resumable; a queued
// task that never started is left untouched (not recorded, no STATUS.md)
// and said not started.
func TestInterruptLeavesQueuedTasksUntouched(t *testing.T) {
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100, costUsd: 0.01}\n    delayMs: 5000\n")
	a, b := f.addTask("a"), f.addTask("b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	f.observe = func(ev purser.Event) {
		if ev.TaskID == "a" && ev.Type == purser.EventCall {
			once.Do(cancel)
		}
	}
	outcomes, err := f.engine().RunBatch(ctx, engine.Batch{Tasks: []purser.Task{a, b}, Parallel: 1})
	must(t, err)
	if err := outcomes[0].Err; !errors.Is(err, engine.ErrInterrupted) || errors.Is(err, engine.ErrNotStarted) {
		t.Fatalf("task a: %v, want interrupted mid-run", err)
	}
	if err := outcomes[1].Err; !errors.Is(err, engine.ErrNotStarted) || !errors.Is(err, engine.ErrInterrupted) {
		t.Fatalf("task b: %v, want not started (an interruption)", err)
	}
	if _, err := f.store.Task(context.Background(), "b"); !errors.Is(err, purser.ErrNotFound) {
		t.Fatalf("task b is in the store (%v): a task that never started must be left untouched", err)
	}
	if _, err := os.Stat(filepath.Join(b.Workspace, "STATUS.md")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("task b has a STATUS.md (%v)", err)
	}
	rec, err := f.store.Task(context.Background(), "a")
	must(t, err)
	if rec.State != purser.StatePending {
		t.Fatalf("task a is %s, want PENDING (resumable)", rec.State)
	}
	var notStarted bool
	f.mu.Lock()
	for _, ev := range f.events {
		notStarted = notStarted || (ev.TaskID == "b" && ev.Type == purser.EventNotStarted)
	}
	f.mu.Unlock()
	if !notStarted {
		t.Fatal("no not_started event for task b")
	}
}

// fakeOwners names this process "me" and knows which other owners are alive.
type fakeOwners struct{ alive map[string]bool }

func (o fakeOwners) Self() string           { return "me" }
func (o fakeOwners) Gone(owner string) bool { return !o.alive[owner] }

func TestRunBatchSkipsDoneTasksAndRefusesOnesRunningElsewhere(t *testing.T) {
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100}\n    files: {src/fixed: yes}\n")
	f.cfg.Owners = fakeOwners{alive: map[string]bool{"other": true}}
	done, busy, dead := f.addTask("done"), f.addTask("busy"), f.addTask("dead")
	ctx := context.Background()
	must(t, f.store.SaveTask(ctx, purser.TaskRecord{ID: "done", Workspace: done.Workspace, State: purser.StateDone, Budget: done.Budget}))
	must(t, f.store.SaveTask(ctx, purser.TaskRecord{ID: "busy", Workspace: busy.Workspace, State: purser.StateRunning, Owner: "other", Budget: busy.Budget}))
	must(t, f.store.SaveTask(ctx, purser.TaskRecord{ID: "dead", Workspace: dead.Workspace, State: purser.StateRunning, Owner: "gone", Budget: dead.Budget}))

	_, err := f.engine().RunBatch(ctx, engine.Batch{Tasks: []purser.Task{done, busy, dead}, Parallel: 1})
	var re *engine.RequestError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "busy") || !strings.Contains(err.Error(), "other") {
		t.Fatalf("RunBatch = %v, want a RequestError naming task busy and its owner", err)
	}
	if rec, _ := f.store.Task(ctx, "dead"); rec.State != purser.StateRunning {
		t.Fatalf("a refused batch changed task dead: %s", rec.State)
	}

	outcomes, err := f.engine().RunBatch(ctx, engine.Batch{Tasks: []purser.Task{done, dead}, Parallel: 1})
	must(t, err)
	if !outcomes[0].Skipped || outcomes[0].Err != nil {
		t.Fatalf("task done: %+v, want skipped", outcomes[0])
	}
	if outcomes[1].Skipped || outcomes[1].Err != nil {
		t.Fatalf("task dead (its owner is gone): %+v, want resumed to DONE", outcomes[1])
	}
}

func TestRunBatchRefusesABadRunName(t *testing.T) {
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100}\n")
	for _, name := range []string{"../x", "a b", strings.Repeat("x", 200), "-lead"} {
		_, err := f.engine().RunBatch(context.Background(), engine.Batch{Tasks: []purser.Task{f.task}, Name: name, Parallel: 1})
		var re *engine.RequestError
		if !errors.As(err, &re) {
			t.Errorf("run name %q: %v, want a RequestError", name, err)
		}
	}
}

// Two processes never run one task: a task RUNNING under a live owner is
// not touched, whatever reaches RunTask.
func TestRunTaskRefusesATaskAnotherLiveProcessRuns(t *testing.T) {
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100}\n")
	f.cfg.Owners = fakeOwners{alive: map[string]bool{"other": true}}
	ctx := context.Background()
	must(t, f.store.SaveTask(ctx, purser.TaskRecord{ID: f.task.ID, Workspace: f.workspace, State: purser.StateRunning, Owner: "other", Budget: f.task.Budget}))
	err := f.run()
	var claimed *purser.TaskClaimedError
	if !errors.As(err, &claimed) || claimed.Owner != "other" {
		t.Fatalf("RunTask = %v, want a TaskClaimedError naming owner other", err)
	}
	if rec := f.state(); rec.Owner != "other" || rec.State != purser.StateRunning {
		t.Fatalf("the other process's task was changed: %+v", rec)
	}
	if len(f.calls()) != 0 {
		t.Fatal("a call was made on a task another process runs")
	}
}

// A second process joining a named run with a different budget is refused:
// it would replace the budget the first runs under.
func TestJoiningANamedRunWithADifferentBudgetIsRefused(t *testing.T) {
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100}\n    files: {src/fixed: yes}\n")
	tokens := func(n int64) *budget.Config {
		return &budget.Config{Hard: budget.HardLimits{Tokens: &n, MaxIterations: ptr(10)}}
	}
	a, b := f.addTask("a"), f.addTask("b")
	_, err := f.engine().RunBatch(context.Background(), engine.Batch{Tasks: []purser.Task{a}, Name: "shared", Budget: tokens(40_000), Parallel: 1})
	must(t, err)
	_, err = f.engine().RunBatch(context.Background(), engine.Batch{Tasks: []purser.Task{b}, Name: "shared", Budget: tokens(400_000), Parallel: 1})
	var re *engine.RequestError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "40000") {
		t.Fatalf("join with another budget = %v, want a RequestError naming the run's budget", err)
	}
	if _, err := f.store.Task(context.Background(), "b"); !errors.Is(err, purser.ErrNotFound) {
		t.Fatalf("task b was recorded (%v) though its batch was refused", err)
	}
	// Joining without a budget shares the run's.
	_, err = f.engine().RunBatch(context.Background(), engine.Batch{Tasks: []purser.Task{b}, Name: "shared", Parallel: 1})
	must(t, err)
	run, err := f.store.Run(context.Background(), "shared")
	must(t, err)
	if *run.Budget.Hard.Tokens != 40_000 {
		t.Fatalf("the run's budget became %d tokens", *run.Budget.Hard.Tokens)
	}
}

// A run's wall time goes on across resumes: it does not restart at zero.
func TestRunWallTimeContinuesAcrossResume(t *testing.T) {
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100}\n    delayMs: 300\n")
	f.task.Validators = []purser.Validator{{Name: "never", Run: "exit 1"}}
	f.task.Budget = budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(1)}}
	runBudget := &budget.Config{Hard: budget.HardLimits{TimeMinutes: ptr(budget.Minutes(time.Hour)), MaxIterations: ptr(100)}}
	_, err := f.engine().RunBatch(context.Background(), engine.Batch{Tasks: []purser.Task{f.task}, Name: "night", Budget: runBudget, Parallel: 1})
	must(t, err)
	run, err := f.store.Run(context.Background(), "night")
	must(t, err)
	if run.Elapsed < 300*time.Millisecond {
		t.Fatalf("run elapsed %s after a 300 ms call", run.Elapsed)
	}
	var first *budget.Status
	f.observe = func(ev purser.Event) {
		if first == nil && ev.Run != nil {
			first = ev.Run
		}
	}
	f.task.Budget.Hard.MaxIterations = ptr(2)
	f.task.File = filepath.Join(t.TempDir(), "task.yaml") // outside the workspace: the user's raise
	_, err = f.engine().Resume(context.Background(), f.task, nil)
	must(t, err)
	if first == nil || first.UsedTime < run.Elapsed {
		t.Fatalf("on resume the run's clock read %v, want at least the %s it had run", first, run.Elapsed)
	}
}

// The task's wall time is saved as it runs, not only when an iteration
// ends: a crash mid-call loses at most one heartbeat.
func TestHeartbeatSavesWallTimeMidCall(t *testing.T) {
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100}\n    delayMs: 30000\n")
	f.cfg.Heartbeat = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	callStarted := make(chan struct{})
	var once sync.Once
	f.observe = func(ev purser.Event) {
		if ev.Type == purser.EventCall {
			once.Do(func() { close(callStarted) })
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- f.engine().RunTask(ctx, f.task, nil, "run-1") }()
	elapsed := func() time.Duration {
		rec, err := f.store.Task(context.Background(), f.task.ID)
		if err != nil {
			return 0
		}
		return rec.Elapsed
	}
	select {
	case <-callStarted:
	case <-time.After(time.Minute):
		t.Fatal("the call never started")
	}
	atCall := elapsed()
	deadline := time.Now().Add(20 * time.Second)
	for elapsed() <= atCall {
		if time.Now().After(deadline) {
			t.Fatal("no wall time saved while the call ran")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, engine.ErrInterrupted) {
		t.Fatalf("RunTask = %v", err)
	}
	if calls := f.calls(); len(calls) != 1 || !calls[0].Cancelled {
		t.Fatalf("the wall time was saved only after the call ended: %+v", calls)
	}
}

// A signal may land at any step — a store write, a call, a validator — and
// the task is always left resumable (PENDING), never FAILED by it. The test
// cancels at each event in turn.
func TestInterruptAtAnyStepLeavesTheTaskResumable(t *testing.T) {
	const script = "steps:\n  - usage: {inputTokens: 100, costUsd: 0.01}\n    delayMs: 5\n  - usage: {inputTokens: 100}\n    files: {src/fixed: yes}\n"
	for at := 1; ; at++ {
		f := newFixture(t, script)
		f.task.Planning, f.task.SelfReview = true, true
		ctx, cancel := context.WithCancel(context.Background())
		var n int
		f.observe = func(purser.Event) {
			if n++; n == at {
				cancel()
			}
		}
		err := f.engine().RunTask(ctx, f.task, nil, "run-1")
		cancel()
		if err == nil {
			if at == 1 {
				t.Fatal("the task ran to DONE without a single event")
			}
			return // every step up to DONE was tried
		}
		if !errors.Is(err, engine.ErrInterrupted) {
			t.Fatalf("cancelled at event %d: %v, want interrupted", at, err)
		}
		if s := f.state().State; s != purser.StatePending {
			t.Fatalf("cancelled at event %d: task %s, want PENDING", at, s)
		}
	}
}

// Issue 10 #6: when the call that reached HARD by money changed the
// workspace, the validators run once more (no model call): a fix that
// landed makes the task DONE, not BLOCKED. A call that changed nothing
// leaves it BLOCKED, without running them again.
func TestValidatorsRunOnceMoreAfterACapWhenTheCallChangedTheWorkspace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files string
		want  purser.TaskState
	}{
		{"the fix landed", "    files: {src/fixed: yes}\n", purser.StateDone},
		{"nothing changed", "", purser.StateBlocked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "steps:\n  - usage: {inputTokens: 100, costUsd: 2.0}\n"+tc.files)
			f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("1"), MaxIterations: ptr(5)}}
			err := f.run()
			if got := f.state().State; got != tc.want {
				t.Fatalf("state %s (%v), want %s", got, err, tc.want)
			}
			if len(f.calls()) != 1 {
				t.Fatalf("%d calls, want the one that crossed the cap and no other", len(f.calls()))
			}
			status := readFile(t, filepath.Join(f.workspace, "STATUS.md"))
			if tc.want == purser.StateDone && !strings.Contains(status, "checked once more, with no model call, after the hard cap on money") {
				t.Fatalf("STATUS.md does not say how it got to DONE:\n%s", status)
			}
		})
	}
}

// Issue 15 #1: a budget changes only by an act of the user. A changed budget
// in a task file outside the workspace is taken and recorded; the same change
// in a task file inside the workspace (the agent could have written it) is
// refused, and nothing is recorded.
func TestABudgetChangesOnlyByTheUser(t *testing.T) {
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100}\n")
	f.task.Validators = []purser.Validator{{Name: "never", Run: "exit 1"}}
	f.task.Budget = budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(1)}}
	ctx := context.Background()
	if err := f.run(); !engine.IsBudgetStop(err) {
		t.Fatalf("first run = %v, want BLOCKED", err)
	}
	raised := f.task
	raised.Budget = budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(1000)}}

	inside := raised
	inside.File = filepath.Join(f.workspace, "task.yaml")
	var re *engine.RequestError
	if _, err := f.engine().RunBatch(ctx, engine.Batch{Tasks: []purser.Task{inside}, Parallel: 1}); !errors.As(err, &re) {
		t.Fatalf("a raise from inside the workspace = %v, want refused", err)
	}
	if _, err := f.engine().Resume(ctx, inside, nil); !errors.As(err, &re) {
		t.Fatalf("resume with a raise from inside the workspace = %v, want refused", err)
	}
	if changes, err := f.store.BudgetChanges(ctx, f.task.ID); err != nil || len(changes) != 0 {
		t.Fatalf("changes recorded for refused raises: %+v (%v)", changes, err)
	}

	outside := raised
	outside.File = filepath.Join(f.dir, "task.yaml")
	outside.Budget.Hard.MaxIterations = ptr(2)
	if _, err := f.engine().Resume(ctx, outside, nil); err != nil {
		t.Fatal(err)
	}
	changes, err := f.store.BudgetChanges(ctx, f.task.ID)
	if err != nil || len(changes) != 1 || changes[0].Source != outside.File || *changes[0].To.Hard.MaxIterations != 2 || *changes[0].From.Hard.MaxIterations != 1 {
		t.Fatalf("changes %+v (%v), want the one raise from %s", changes, err, outside.File)
	}
}
