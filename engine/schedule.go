package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/tick"
	"github.com/purser-dev/purser/workspace"
)

// RequestError is a run or resume the engine refused before anything ran or
// was recorded: the request itself is wrong (a task RUNNING in another live
// process, a bad run name, a task file that changed its id).
type RequestError struct{ Err error }

func (e *RequestError) Error() string { return e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }

func refused(format string, args ...any) error {
	return &RequestError{Err: fmt.Errorf(format, args...)}
}

// ErrNotStarted is the cause of a task a signal stopped before it started:
// it was left untouched, as it was.
var ErrNotStarted = fmt.Errorf("%w before it started", ErrInterrupted)

// Batch is a run: tasks that run together, at most Parallel at once, in the
// order given, sharing the run's budget.
type Batch struct {
	Tasks []purser.Task
	// Name makes the run a named one that other processes on the same store
	// may join, sharing its budget; empty: a fresh run of its own.
	Name string
	// Budget is the run's budget; nil: none, or a named run's own.
	Budget   *budget.Config
	Parallel int // at least 1
}

// TaskOutcome is what became of one task of a batch.
type TaskOutcome struct {
	Task purser.Task
	// Skipped is set when the task was not run because it is already DONE.
	Skipped bool
	// Err is nil for a task DONE (or skipped); a *StopError otherwise, whose
	// cause is ErrNotStarted for a task a signal kept from starting.
	Err error
}

// validRunName is what a named run may be called: it lands in records and
// messages, so it is kept plain.
var validRunName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func newRunID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// RunBatch runs a batch of tasks. A task already DONE is skipped (give it a
// new id to run it again); a task RUNNING in another live process refuses
// the whole batch with a *RequestError before anything is recorded. The
// outcomes are in the order of b.Tasks.
func (e *Engine) RunBatch(ctx context.Context, b Batch) ([]TaskOutcome, error) {
	if b.Parallel < 1 {
		return nil, refused("parallel: want at least 1, got %d", b.Parallel)
	}
	if b.Name != "" && !validRunName.MatchString(b.Name) {
		return nil, refused("run name %q: want letters, digits, '.', '_' or '-' (at most 128)", b.Name)
	}
	outcomes := make([]TaskOutcome, len(b.Tasks))
	var pending []int
	var changes []*purser.BudgetChange
	for i, t := range b.Tasks {
		outcomes[i].Task = t
		rec, err := e.cfg.Store.Task(ctx, t.ID)
		switch {
		case errors.Is(err, purser.ErrNotFound):
		case err != nil:
			return nil, err
		case rec.State == purser.StateDone:
			outcomes[i].Skipped = true
			continue
		case e.runningElsewhere(rec):
			return nil, refused("task %s is RUNNING in another process (%s)", t.ID, rec.Owner)
		default:
			if err := e.keepRaise(ctx, rec, &t); err != nil {
				return nil, err
			}
			outcomes[i].Task = t
			change, err := e.budgetChange(rec, t, nil)
			if err != nil {
				return nil, err
			}
			if change != nil {
				changes = append(changes, change)
			}
		}
		pending = append(pending, i)
	}
	if len(pending) == 0 {
		return outcomes, nil
	}
	draws, err := e.taskDraws(ctx, b.Tasks, pending)
	if err != nil {
		return nil, err
	}
	// Only once the whole batch is accepted.
	if err := e.recordBudgetChanges(ctx, changes); err != nil {
		return nil, err
	}
	run, err := e.openRun(ctx, b)
	if err != nil {
		return nil, err
	}
	if err := e.recordDraws(ctx, run.ID, draws); err != nil {
		return nil, err
	}
	rs, err := e.runBudget(ctx, run)
	if err != nil {
		return nil, err
	}
	e.schedule(ctx, run.ID, rs, outcomes, pending, b.Parallel)
	return outcomes, nil
}

// openRun records a fresh run, or joins the named one: a named run keeps the
// budget it was created with, and joining it with a different budget is
// refused (it would silently replace the budget the other processes run
// under).
func (e *Engine) openRun(ctx context.Context, b Batch) (purser.Run, error) {
	if b.Name == "" {
		run := purser.Run{ID: newRunID(e.cfg.Clock.Now()), Budget: b.Budget}
		return run, e.cfg.Store.SaveRun(ctx, run)
	}
	return JoinRun(ctx, e.cfg.Store, b.Name, b.Budget)
}

// RunJoiner is the part of a store JoinRun uses.
type RunJoiner interface {
	JoinRun(ctx context.Context, run purser.Run) (purser.Run, error)
}

// JoinRun joins the run named name, creating it with budget b (nil: none)
// where it does not exist. A named run keeps the budget it was created
// with: joining it with a different budget is refused with a RequestError,
// since it would silently replace the budget the other processes run
// under. It is the one rule for `purser run --run` and `purser submit`.
func JoinRun(ctx context.Context, store RunJoiner, name string, b *budget.Config) (purser.Run, error) {
	run, err := store.JoinRun(ctx, purser.Run{ID: name, Budget: b})
	if err != nil {
		return run, err
	}
	if b != nil && !sameBudget(run.Budget, b) {
		return run, refused("run %s already runs under %s; joining it with a different budget (%s) is refused: join without --run-budget to share its budget, or name a new run",
			run.ID, describeBudget(run.Budget), describeBudget(b))
	}
	return run, nil
}

func sameBudget(a, b *budget.Config) bool {
	if a == nil || b == nil {
		return a == b
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// describeBudget is a budget's hard caps as written in a budget file.
func describeBudget(c *budget.Config) string {
	if c == nil {
		return "no budget"
	}
	b, _ := json.Marshal(c.Hard)
	return "hard " + string(b)
}

// schedule runs the tasks at the indexes pending, at most parallel at once,
// starting them in order. Once ctx is done, no further task starts: each is
// left as it was and said not started. The run's budget (rs, nil for none)
// follows the run's spend in every process while the tasks run.
func (e *Engine) schedule(ctx context.Context, runID string, rs *runSync, outcomes []TaskOutcome, pending []int, parallel int) {
	var run *budget.Manager
	if rs != nil {
		run = rs.mgr
		ids := make([]string, 0, len(pending))
		for _, i := range pending {
			ids = append(ids, outcomes[i].Task.ID)
		}
		defer e.runs.add(rs, ids)()
		defer rs.follow(ctx)()
		defer e.beatRun(ctx, runID, run)()
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, i := range pending {
		select {
		case sem <- struct{}{}: // taken here, so tasks start in the order given
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			t := outcomes[i].Task
			outcomes[i].Err = &StopError{TaskID: t.ID, State: purser.StatePending, Err: ErrNotStarted}
			e.emitNotStarted(t)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			outcomes[i].Err = e.RunTask(ctx, outcomes[i].Task, run, runID)
		}()
	}
	wg.Wait()
}

// beatRun saves the run's wall time every heartbeat while its tasks run, and
// once more when the returned function stops it.
func (e *Engine) beatRun(ctx context.Context, runID string, run *budget.Manager) func() {
	ctx = context.WithoutCancel(ctx)
	save := func() {
		if err := e.cfg.Store.SaveRunElapsed(ctx, runID, run.Totals().Time); err != nil {
			e.cfg.Logger.Warn("heartbeat: saving the run's wall time", "run", runID, "error", err)
		}
	}
	stop := tick.Every(e.cfg.Heartbeat, save)
	return func() { stop(); save() }
}

func (e *Engine) emitNotStarted(t purser.Task) {
	if e.cfg.Observe != nil {
		e.cfg.Observe(purser.Event{TaskID: t.ID, Type: purser.EventNotStarted, State: purser.StatePending,
			Message: "not started: the run was interrupted before it began"})
	}
}

// Resume runs a stopped task again, from its task as read anew from its
// file (so a raised budget takes effect), in the run it belonged to. What
// the task spent carries over. A task already DONE is skipped; one unknown
// to the store, or RUNNING in another live process, is refused.
func (e *Engine) Resume(ctx context.Context, task purser.Task, raise *BudgetRaise) (TaskOutcome, error) {
	rec, err := e.cfg.Store.Task(ctx, task.ID)
	if errors.Is(err, purser.ErrNotFound) {
		return TaskOutcome{}, &RequestError{Err: err}
	}
	if err != nil {
		return TaskOutcome{}, err
	}
	if rec.State == purser.StateDone {
		return TaskOutcome{Task: task, Skipped: true}, nil
	}
	if e.runningElsewhere(rec) {
		return TaskOutcome{}, refused("task %s is RUNNING in another process (%s); nothing to resume", rec.ID, rec.Owner)
	}
	if raise != nil {
		task.Budget = raise.Budget
	} else if err := e.keepRaise(ctx, rec, &task); err != nil {
		return TaskOutcome{}, err
	}
	change, err := e.budgetChange(rec, task, raise)
	if err != nil {
		return TaskOutcome{}, err
	}
	draws, err := e.taskDraws(ctx, []purser.Task{task}, []int{0})
	if err != nil {
		return TaskOutcome{}, err
	}
	if len(draws) > 0 && rec.RunID == "" {
		return TaskOutcome{}, refused("task %s draws from named budgets (%s) but was recorded in no run, which a named budget counts the spend of; run it anew with purser run", task.ID, strings.Join(draws, ", "))
	}
	if change != nil {
		if err := e.recordBudgetChanges(ctx, []*purser.BudgetChange{change}); err != nil {
			return TaskOutcome{}, err
		}
	}
	if err := e.recordDraws(ctx, rec.RunID, draws); err != nil {
		return TaskOutcome{}, err
	}
	var rs *runSync
	if rec.RunID != "" {
		run, err := e.cfg.Store.Run(ctx, rec.RunID)
		switch {
		case errors.Is(err, purser.ErrNotFound):
		case err != nil:
			return TaskOutcome{}, err
		default:
			if rs, err = e.runBudget(ctx, run); err != nil {
				return TaskOutcome{}, err
			}
		}
	}
	outcomes := []TaskOutcome{{Task: task}}
	e.schedule(ctx, rec.RunID, rs, outcomes, []int{0}, 1)
	return outcomes[0], nil
}

// BudgetRaise is a new budget for a task, given explicitly by the user on
// resume (a file outside every workspace, or a flag).
type BudgetRaise struct {
	Budget budget.Config
	Source string // the file it came from
	By     string // who asked: user@host
}

// budgetChange guards the budget a task was recorded with. A task's budget
// changes only by an act of the user: an explicit raise, or a task file the
// agent cannot write (outside the task's workspace). A task file inside its
// workspace may have been rewritten by the agent, so a change there is
// refused. It returns the change to record, or nil when there is none.
func (e *Engine) budgetChange(rec purser.TaskRecord, task purser.Task, raise *BudgetRaise) (*purser.BudgetChange, error) {
	if sameBudget(&rec.Budget, &task.Budget) {
		return nil, nil
	}
	change := &purser.BudgetChange{TaskID: task.ID, At: e.cfg.Clock.Now(), Source: task.File, From: rec.Budget, To: task.Budget}
	if raise != nil {
		change.Source, change.By = raise.Source, raise.By
		if workspace.Contains(task.Workspace, raise.Source) {
			return nil, refused("budget file %s lies inside task %s's workspace, where the agent can write: give a file outside it", raise.Source, task.ID)
		}
	} else if workspace.Contains(task.Workspace, task.File) {
		return nil, refused("task %s: its budget in %s changed since it was recorded (%s, now %s), and that file lies inside the task's workspace, where the agent can write; the change is refused. To change the budget, resume with --budget FILE (a file outside the workspace)",
			task.ID, task.File, describeBudget(&rec.Budget), describeBudget(&task.Budget))
	}
	return change, nil
}

// recordBudgetChanges keeps every change with who, when and from where, and
// says it in the log: a budget never changes silently.
func (e *Engine) recordBudgetChanges(ctx context.Context, changes []*purser.BudgetChange) error {
	for _, c := range changes {
		if err := e.cfg.Store.SaveBudgetChange(ctx, *c); err != nil {
			return err
		}
		e.cfg.Logger.Warn("budget changed by the user", "task", c.TaskID, "from", describeBudget(&c.From), "to", describeBudget(&c.To), "source", c.Source, "by", c.By)
	}
	return nil
}

// runBudget is the run's budget with what all its tasks have spent already,
// its clock running, ready to follow what every process sharing the run
// spends; nil when the run has no budget.
func (e *Engine) runBudget(ctx context.Context, run purser.Run) (*runSync, error) {
	if run.Budget == nil {
		return nil, nil
	}
	spent, err := e.cfg.Store.RunUsageTotals(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	spent.Time = run.Elapsed // the run's clock goes on where it stopped
	m, err := budget.NewManager(*run.Budget, budget.Options{Scope: budget.ScopeRun, Initial: spent, Clock: e.cfg.Clock})
	if err != nil {
		return nil, &RequestError{Err: fmt.Errorf("run %s budget: %w", run.ID, err)}
	}
	m.StartClock()
	return &runSync{e: e, runID: run.ID, mgr: m, initial: spent}, nil
}

// runningElsewhere reports whether a live process other than this one is
// running the task.
func (e *Engine) runningElsewhere(rec purser.TaskRecord) bool {
	return rec.State == purser.StateRunning && rec.Owner != "" && rec.Owner != e.owner && !e.cfg.Owners.Gone(rec.Owner)
}

// ValidRunName says whether a run may be given this name.
func ValidRunName(name string) bool { return validRunName.MatchString(name) }

// taskDraws is the named budgets the tasks at the indexes pending draw
// from (their task files' drawFrom:), each once, sorted. A name the store
// does not know, or a store that keeps no named budgets, refuses the
// request before anything is recorded.
func (e *Engine) taskDraws(ctx context.Context, tasks []purser.Task, pending []int) ([]string, error) {
	var names []string
	for _, i := range pending {
		t := tasks[i]
		for _, n := range t.DrawFrom {
			if slices.Contains(names, n) {
				continue
			}
			if e.cfg.Named == nil {
				return nil, refused("task %s draws from named budget %s, but this store keeps no named budgets", t.ID, n)
			}
			if _, err := e.cfg.Named.NamedBudget(ctx, n); errors.Is(err, purser.ErrNotFound) {
				return nil, refused("task %s: drawFrom: no named budget %q (create it with purser budgets create %s --file FILE --window month)", t.ID, n, n)
			} else if err != nil {
				return nil, err
			}
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// recordDraws records that the run draws from the named budgets: a named
// budget counts the spend of the runs drawing from it, and admits their
// calls. Draws are only ever added, so a task file rewritten without its
// drawFrom: does not take the run out of a budget.
func (e *Engine) recordDraws(ctx context.Context, runID string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	if err := e.cfg.Named.DrawFrom(ctx, runID, names); err != nil {
		if errors.Is(err, purser.ErrNotFound) {
			return &RequestError{Err: err}
		}
		return err
	}
	return nil
}
