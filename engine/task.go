package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/internal/tick"
	"github.com/purser-dev/purser/redact"
	"github.com/purser-dev/purser/workspace"
)

// taskRun is the state of one task while it runs.
type taskRun struct {
	e       *Engine
	task    purser.Task
	runID   string
	backend purser.Backend
	budget  *budget.Manager
	log     *slog.Logger

	iteration      int
	plan           string
	failing        []purser.ValidatorResult
	history        []string // the last contextbuild.HistoryWindow iterations, one line each
	historyOmitted int      // earlier iterations no longer in history
	feedback       string   // problems with the agent's last answer, for the next call
	doneNote       string   // how the task got to DONE, when not the plain way
	degradeSeen    map[purser.DegradeAction]bool

	backendErr error // why the task's backend could not be made, if it could not

	fc *forecastState // the spend forecast (forecast.go)
	// switches is the task's ledger as judging switch_tier_cheap needs it
	// (switchledger.go).
	switches switchLedger
	stuck    stuckState   // iterations failing the same way, unchanged (stuck.go)
	subs     subAgentBook // the sub-agents spawned and what each spent (subagent.go)

	// draws are the named budgets the call in flight was admitted against,
	// and namedRoom the money they had left for it (its own hold included;
	// budget.UnlimitedUSD when none caps money): its reported dollars are
	// checked against them as they arrive.
	draws     []string
	namedRoom budget.USD

	mu          sync.Mutex
	cancelCall  context.CancelCauseFunc // the call in flight, if any
	namedStop   error                   // a named budget's cap reached by the call in flight
	wireStop    error                   // the cap that refused a request of the call in flight at the door
	wrapUpAsked bool                    // the wrap-up turn was asked for (once per task)
	wrapUpText  string                  // its reply, for STATUS.md
}

// RunTask runs a task until its validators pass (DONE), its budget stops it
// (BLOCKED) or it fails (FAILED). run is the run's budget, or nil. A task
// already in the store continues from what it spent: this is also resume.
// It returns nil only when the task is DONE, else a *StopError.
func (e *Engine) RunTask(ctx context.Context, task purser.Task, run *budget.Manager, runID string) error {
	t := &taskRun{e: e, task: task, runID: runID, log: e.cfg.Logger.With("task", task.ID),
		degradeSeen: map[purser.DegradeAction]bool{}, namedRoom: budget.UnlimitedUSD}
	if err := t.start(ctx, run); err != nil {
		var claimed *purser.TaskClaimedError
		switch {
		case errors.As(err, &claimed):
			// Another process runs it: nothing here was recorded or changed.
			return &StopError{TaskID: task.ID, State: purser.StateRunning, Err: err}
		case ctx.Err() != nil:
			return &StopError{TaskID: task.ID, State: purser.StatePending, Err: interrupted(ctx)}
		}
		return &StopError{TaskID: task.ID, State: purser.StateFailed, Err: err}
	}
	if t.backendErr != nil {
		return t.finish(ctx, purser.StateFailed, fmt.Errorf("backend %s: %w", task.Backend.Name, t.backendErr))
	}
	t.seedSpawns(ctx)
	var err error

	// The moment any recording crosses HARD, the call in flight is
	// cancelled — unless that budget says onHard: finish-call, when the
	// call ends by itself and the stop comes after it (outcome).
	onHard := func(c budget.Change) {
		e.emit(t, purser.Event{Type: purser.EventTier, Message: t.tierMessage(c)}) // the alerts are made from it
		if c.To == budget.Hard {
			if t.finishesCall(c.Scope) {
				t.log.Warn("hard cap crossed: the call in flight is let end (onHard: finish-call)", "scope", c.Scope, "metric", c.Status.Cause)
				return
			}
			t.cancelInFlight(fmt.Errorf("%s hard cap crossed by %s", c.Scope, c.Status.Cause))
		}
	}
	defer t.budget.OnChange(onHard)()
	if run != nil {
		defer run.OnChange(onHard)()
	}

	t.startForecast(ctx)
	t.budget.StartClock()
	stopHeartbeat := t.heartbeat(ctx)
	err = t.loop(ctx)
	stopHeartbeat()
	t.budget.StopClock()
	switch {
	case err == nil:
		return t.finish(ctx, purser.StateDone, nil)
	case IsBudgetStop(err), errors.Is(err, purser.ErrStuck):
		return t.finish(ctx, purser.StateBlocked, err)
	case errors.Is(err, ErrInterrupted):
		return t.finish(ctx, purser.StatePending, err)
	case ctx.Err() != nil:
		// A signal, whatever step it cut (a store write, a validator): the
		// task stays resumable, never FAILED by its own interruption.
		return t.finish(ctx, purser.StatePending, fmt.Errorf("%w (%v)", interrupted(ctx), err))
	}
	return t.finish(ctx, purser.StateFailed, err)
}

// interrupted is the cause of a stop by ctx.
func interrupted(ctx context.Context) error {
	return fmt.Errorf("%w: %v", ErrInterrupted, context.Cause(ctx))
}

// start restores what the task spent before (a resume), builds its budget
// inside the run's, and records it RUNNING under this process.
func (t *taskRun) start(ctx context.Context, run *budget.Manager) error {
	e := t.e
	prior, err := e.cfg.Store.Task(ctx, t.task.ID)
	switch {
	case errors.Is(err, purser.ErrNotFound):
		prior = purser.TaskRecord{ID: t.task.ID, State: purser.StatePending}
	case err != nil:
		return err
	}
	totals, err := e.cfg.Store.UsageTotals(ctx, t.task.ID)
	if err != nil {
		return err
	}
	totals.Time = prior.Elapsed
	t.iteration = totals.Iterations
	if t.budget, err = budget.NewManager(t.task.Budget, budget.Options{Clock: e.cfg.Clock, Parent: run, Initial: totals}); err != nil {
		return err
	}
	// The goal is stored redacted (issue 23 #10): a key pasted into it
	// would otherwise sit in the database and on the dashboard.
	rec := purser.TaskRecord{ID: t.task.ID, RunID: t.runID, Goal: redact.String(t.task.Goal), Workspace: t.task.Workspace, File: t.task.File,
		Budget: t.task.Budget, State: purser.StateRunning, Elapsed: prior.Elapsed, Owner: e.owner}
	if err := e.cfg.Store.ClaimTask(ctx, rec, e.cfg.Owners.Gone); err != nil {
		return err
	}
	// The backend before the interrupted calls: it is what reads their
	// session files.
	t.backend, t.backendErr = e.cfg.Backends(t.task.Backend)
	if t.backendErr == nil {
		// A backend's own files (a transcript) are no agent's to write.
		e.cfg.Guard.ProtectFilesOf(t.backend)
	}
	if err := t.markInterruptedCalls(ctx); err != nil {
		return err
	}
	// After the dead owner's calls are settled, so that what they spent is
	// in the ledger before what they held is let go.
	t.dropDeadOwnersHolds(ctx, prior)
	return nil
}

// heartbeat saves the task's wall time every Config.Heartbeat while it runs,
// so that after a crash the time figure is short by at most one beat and a
// time cap cannot be beaten by crashing and resuming. The returned function
// stops it and waits for it.
func (t *taskRun) heartbeat(ctx context.Context) func() {
	ctx = context.WithoutCancel(ctx)
	return tick.Every(t.e.cfg.Heartbeat, func() {
		if err := t.e.cfg.Store.SaveElapsed(ctx, t.task.ID, t.budget.Totals().Time); err != nil {
			t.log.Warn("heartbeat: saving the task's wall time", "error", err)
		}
	})
}

// markInterruptedCalls records calls that started but never ended — the
// process running them died — as interrupted. Their usage, made durable as
// it streamed, stands; what the CLI's session file holds beyond it (a reply
// delivered that Purser died before reading) is recovered first, once
// nothing of the call runs any more, so the file is complete.
func (t *taskRun) markInterruptedCalls(ctx context.Context) error {
	calls, err := t.e.cfg.Store.Calls(ctx, t.task.ID)
	if err != nil {
		return err
	}
	for _, c := range calls {
		if c.Outcome != "" || !c.EndedAt.IsZero() {
			continue
		}
		// Nothing of the dead owner's call may run beside the resumed task.
		if k, ok := t.e.cfg.Owners.(purser.LeftoverKiller); ok && c.Process != "" {
			if n := k.KillLeftovers(c.Process); n > 0 {
				t.log.Warn("killed processes a dead owner's call left running", "call", c.ID, "processes", n)
			}
		}
		t.recoverSpend(ctx, &c, calls, "interrupted call")
		c.Outcome = purser.CallInterrupted
		c.EndedAt = t.e.cfg.Clock.Now()
		c.Error = "Purser stopped mid-call (its process died); the usage recorded up to then stands, with what its session file holds beyond it"
		if err := t.e.cfg.Store.SaveCall(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

func (t *taskRun) cancelInFlight(cause error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancelCall != nil {
		t.cancelCall(cause)
	}
}

// setInFlight makes cancel the call in flight's cancel function (nil: none).
func (t *taskRun) setInFlight(cancel context.CancelCauseFunc) {
	t.mu.Lock()
	t.cancelCall = cancel
	t.mu.Unlock()
}

// loop runs iterations until DONE (nil) or a stop (the error).
func (t *taskRun) loop(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return interrupted(ctx)
		}
		// No runaway loops: at the hard cap the iteration does not start.
		if err := t.budget.Check(); err != nil {
			return err
		}
		t.iteration++
		done, err := t.runIteration(ctx)
		if err != nil || done {
			return err
		}
	}
}

// runIteration runs one iteration: planning, the main call, self-review and
// the validators. It reports whether every validator passed.
func (t *taskRun) runIteration(ctx context.Context) (done bool, err error) {
	e := t.e
	it := purser.IterationRecord{TaskID: t.task.ID, N: t.iteration, StartedAt: e.cfg.Clock.Now()}
	if err := e.cfg.Store.SaveIteration(ctx, it); err != nil {
		return false, err
	}
	e.emit(t, purser.Event{Type: purser.EventIteration, Message: fmt.Sprintf("iteration %d starts", t.iteration)})
	t.log.Info("iteration starts", "iteration", t.iteration)

	// The workspace's fingerprint is a walk of it: taken only for what
	// reads it, the check after a hard cap (which needs validators to
	// run) and stuckAfter.
	stuckOn := t.task.Budget.StuckAfter != nil
	var before string
	if stuckOn || len(t.task.Validators) > 0 {
		before = t.fingerprint()
	}
	if err := t.calls(ctx); err != nil {
		results, ok := t.revalidateAfterCap(ctx, err, before)
		if ok {
			return t.endIteration(ctx, it, results)
		}
		return false, t.stopIteration(ctx, it, results, err)
	}
	var after string
	if stuckOn {
		after = t.fingerprint()
	}
	results := t.runValidators(ctx)
	if ctx.Err() != nil {
		// Cut mid-way: a partial run is no verdict on this iteration.
		return false, t.stopIteration(ctx, it, nil, interrupted(ctx))
	}
	done, err = t.endIteration(ctx, it, results)
	if err == nil && !done {
		err = t.checkStuck(before, after, results)
	}
	return done, err
}

// calls makes the iteration's calls: the optional planning call, the main
// call and the optional self-review, each decided on the budget of the
// moment. It ends at the hard cap, before the validators.
func (t *taskRun) calls(ctx context.Context) error {
	if t.task.Planning {
		if d := t.degrade(); d.on(purser.DisableSelfReview) {
			t.noteDegrade(ctx, d, purser.CallPlanning, purser.DisableSelfReview, "planning call skipped")
		} else {
			text, err := t.call(ctx, purser.CallPlanning)
			if err != nil {
				return err
			}
			t.plan = text
		}
	}
	if _, err := t.call(ctx, purser.CallMain); err != nil {
		return err
	}
	if t.task.SelfReview {
		if d := t.degrade(); d.on(purser.DisableSelfReview) {
			t.noteDegrade(ctx, d, purser.CallSelfReview, purser.DisableSelfReview, "self-review call skipped")
		} else if _, err := t.call(ctx, purser.CallSelfReview); err != nil {
			return err
		}
	}
	// The hard cap may have been reached by the last call's final usage.
	return t.budget.Check()
}

// revalidateAfterCap runs the validators once more when a hard cap on
// money, tokens or iterations stopped a call that changed the workspace: if
// that call's fix landed, the task is DONE, not BLOCKED. No model call is
// made, and the validators are bounded by their timeouts. A cap on time is
// not followed by anything: the time is up. It reports whether every
// validator passed, with their results when they ran to the end (nil when
// they did not run or were cut).
func (t *taskRun) revalidateAfterCap(ctx context.Context, stop error, before string) ([]purser.ValidatorResult, bool) {
	var be *budget.BudgetExhaustedError
	if !errors.As(stop, &be) || be.Metric == budget.Time || ctx.Err() != nil || len(t.task.Validators) == 0 {
		return nil, false
	}
	if after := t.fingerprint(); before != "" && after == before {
		return nil, false // the call changed nothing: nothing new to validate
	}
	t.log.Info("hard cap reached by a call that changed the workspace: running the validators once more", "metric", be.Metric)
	results := t.runValidators(ctx)
	if ctx.Err() != nil {
		return nil, false
	}
	for _, r := range results {
		if !r.Passed {
			t.failing = failingOf(results)
			return results, false
		}
	}
	t.doneNote = fmt.Sprintf("checked once more, with no model call, after the hard cap on %s stopped the call that changed the workspace", be.Metric)
	return results, true
}

// fingerprint is the task's workspace's fingerprint (workspace.Fingerprint).
func (t *taskRun) fingerprint() string {
	if n, ok := fingerprintsTaken.Load(t.task.Workspace); ok {
		n.(*atomic.Int64).Add(1)
	}
	return workspace.Fingerprint(t.task.Workspace)
}

// fingerprintsTaken counts, for the workspaces the tests name, the
// fingerprints taken of them (fingerprint_export_test.go): each is a walk
// of the workspace.
var fingerprintsTaken sync.Map

func failingOf(results []purser.ValidatorResult) []purser.ValidatorResult {
	var failing []purser.ValidatorResult
	for _, r := range results {
		if !r.Passed {
			failing = append(failing, r)
		}
	}
	return failing
}

// runValidators runs every validator of the task, in order.
func (t *taskRun) runValidators(ctx context.Context) []purser.ValidatorResult {
	results := make([]purser.ValidatorResult, 0, len(t.task.Validators))
	for _, v := range t.task.Validators {
		r := t.e.cfg.Validators.RunValidator(ctx, t.task.Workspace, v)
		results = append(results, r)
		t.e.emit(t, purser.Event{Type: purser.EventValidator, Message: fmt.Sprintf("validator %s: %s", v.Name, passText(r))})
		t.log.Info("validator", "iteration", t.iteration, "name", v.Name, "passed", r.Passed, "exit", r.ExitCode)
	}
	return results
}

// stopIteration records an iteration cut short by err, and returns err. An
// iteration stopped by the budget ended, and counts. One cut by a signal or
// a failure did not: a resume runs it again. results are the validators'
// results when they ran in this iteration (after a hard cap), nil when they
// did not: an earlier iteration's results are never stored as this one's,
// or the reports would name this iteration for what another found.
func (t *taskRun) stopIteration(ctx context.Context, it purser.IterationRecord, results []purser.ValidatorResult, err error) error {
	ctx = context.WithoutCancel(ctx)
	it.EndedAt, it.Outcome, it.Validators = t.e.cfg.Clock.Now(), "stopped", results
	if IsBudgetStop(err) {
		_ = t.record(ctx, budget.UsageEvent{IterationEnd: true}, t.iterationEndKey())
	} else {
		it.Outcome = "interrupted"
	}
	_ = t.e.cfg.Store.SaveIteration(ctx, it)
	return err
}

// endIteration records an iteration whose validators ran, and what failed
// for the next one to fix.
func (t *taskRun) endIteration(ctx context.Context, it purser.IterationRecord, results []purser.ValidatorResult) (bool, error) {
	e := t.e
	t.failing = failingOf(results)
	it.Validators, it.EndedAt, it.Outcome = results, e.cfg.Clock.Now(), "failed"
	if len(t.failing) == 0 {
		it.Outcome = "passed"
	}
	if err := t.record(ctx, budget.UsageEvent{IterationEnd: true}, t.iterationEndKey()); err != nil {
		return false, err
	}
	if err := e.cfg.Store.SaveIteration(ctx, it); err != nil {
		return false, err
	}
	if err := e.cfg.Store.SaveElapsed(ctx, t.task.ID, t.budget.Totals().Time); err != nil {
		return false, err
	}
	t.history = append(t.history, fmt.Sprintf("Iteration %d: %d of %d validators passed.", t.iteration, len(results)-len(t.failing), len(results)))
	if extra := len(t.history) - contextbuild.HistoryWindow; extra > 0 {
		// Only the window reaches a prompt: keep no more, however long the task runs.
		t.history, t.historyOmitted = slices.Clone(t.history[extra:]), t.historyOmitted+extra
	}
	return len(t.failing) == 0, nil
}

func (t *taskRun) iterationEndKey() string {
	return fmt.Sprintf("%s/iter/%d/end", t.task.ID, t.iteration)
}

func passText(r purser.ValidatorResult) string {
	switch {
	case r.Passed:
		return "passed"
	case r.TimedOut:
		return "timed out"
	}
	return fmt.Sprintf("failed (exit %d)", r.ExitCode)
}

// noteDegrade records a degrade action, with the tier and metric that caused
// it; the log says it the first time in this run of the task.
func (t *taskRun) noteDegrade(ctx context.Context, d degradeState, call purser.CallKind, a purser.DegradeAction, detail string) {
	first := !t.degradeSeen[a]
	t.degradeSeen[a] = true
	if d.why != "" {
		detail += "; " + d.why
	}
	msg := fmt.Sprintf("degrade %s (%s): %s budget in %s by %s", a, detail, d.scope, d.tier, d.metric)
	if first {
		t.log.Warn("degrade", "action", a, "detail", detail, "tier", d.tier, "metric", d.metric, "scope", d.scope, "iteration", t.iteration)
	}
	_ = t.e.cfg.Store.SaveDegrade(ctx, purser.DegradeRecord{TaskID: t.task.ID, Iteration: t.iteration, Call: call, Action: a,
		Tier: d.tier, Metric: d.metric, Scope: d.scope, Detail: detail, At: t.e.cfg.Clock.Now()})
	t.e.emit(t, purser.Event{Type: purser.EventDegrade, Call: call, Message: msg})
}

// record puts an event that is not part of a call (an iteration's end) in
// the ledger and on the budget.
func (t *taskRun) record(ctx context.Context, ev budget.UsageEvent, key string) error {
	if err := t.appendLedger(ctx, "", purser.CallMain, ev, key); err != nil {
		return err
	}
	t.budget.RecordUsage(ev)
	return nil
}

func (t *taskRun) appendLedger(ctx context.Context, callID string, kind purser.CallKind, ev budget.UsageEvent, key string) error {
	// The task's calls' events first: the ledger keeps the order they came.
	t.e.runs.pending.flush(t.task.ID)
	return t.e.cfg.Store.AppendUsage(ctx, t.ledgerEntry(callID, kind, ev, key))
}

// ledgerEntry is the ledger's entry for ev, spent now by the task in its
// iteration. Priced already: the model's name (and the price source that
// quotes it) are stored redacted, as every other text (issue 23 #10).
func (t *taskRun) ledgerEntry(callID string, kind purser.CallKind, ev budget.UsageEvent, key string) purser.LedgerEntry {
	ev.Model, ev.PriceSource = redact.String(ev.Model), redact.String(ev.PriceSource)
	return purser.LedgerEntry{Key: key, TaskID: t.task.ID, RunID: t.runID, CallID: callID,
		Iteration: t.iteration, Kind: kind, Event: ev, At: t.e.cfg.Clock.Now()}
}

// finish records the task's final state and writes STATUS.md and BUDGET.md
// at the workspace root and in the store. The workspace is otherwise left
// exactly as it is: nothing is reverted, reset or cleaned.
func (t *taskRun) finish(ctx context.Context, state purser.TaskState, cause error) error {
	e := t.e
	ctx = context.WithoutCancel(ctx) // a signal must not stop the bookkeeping
	reason := "all validators passed"
	if t.doneNote != "" {
		reason += " (" + t.doneNote + ")"
	}
	if cause != nil {
		reason = redact.String(cause.Error())
	}
	var errs []error
	if err := e.cfg.Store.SaveElapsed(ctx, t.task.ID, t.budget.Totals().Time); err != nil {
		errs = append(errs, err)
	}
	// The artifacts first, so that a refusal to write one (a link planted
	// in the workspace) is part of the reason kept in the task's record.
	recorded := reason
	if err := t.writeArtifacts(ctx, state, cause); err != nil {
		errs = append(errs, err)
		recorded += "; " + redact.String(err.Error())
	}
	if err := e.cfg.Store.SetTaskState(ctx, t.task.ID, state, recorded); err != nil {
		errs = append(errs, err)
	}
	e.emit(t, purser.Event{Type: purser.EventStop, State: state, Message: fmt.Sprintf("%s: %s", state, reason)})
	t.log.Info("task stops", "state", state, "reason", reason)
	if state == purser.StateDone && len(errs) == 0 {
		return nil
	}
	if cause == nil {
		cause = errors.Join(errs...)
	} else if len(errs) > 0 {
		cause = fmt.Errorf("%w (and recording the stop: %v)", cause, errors.Join(errs...))
	}
	return &StopError{TaskID: t.task.ID, State: state, Err: cause}
}

// writeArtifacts has Config.Artifacts render STATUS.md and BUDGET.md from
// what the task's run knows as it stops, writes them at the workspace root
// without following a link, and keeps them in the store.
func (t *taskRun) writeArtifacts(ctx context.Context, state purser.TaskState, cause error) error {
	e := t.e
	stop := purser.TaskStop{Task: t.task, State: state, Cause: cause, Status: t.budget.Status(),
		InGitRepo: workspace.InGitRepo(t.task.Workspace), DoneNote: t.doneNote, Forecast: t.lastForecast()}
	if p := t.budget.Parent(); p != nil {
		st := p.Status()
		stop.RunStatus = &st
		stop.RunBudget = p.Config()
	}
	statusMD, budgetMD, err := e.cfg.Artifacts.RenderArtifacts(ctx, e.cfg.Store, stop)
	if err != nil {
		return err
	}
	statusMD = t.withWrapUp(statusMD)
	// In the workspace, the task's own names (STATUS.md, or STATUS.<id>.md
	// when another task sharing the workspace has STATUS.md); in the store,
	// which keeps each task's apart, always STATUS.md and BUDGET.md.
	own := workspace.ArtifactsOf(t.task.Workspace, t.task.ID)
	var errs []error
	for _, a := range []struct {
		name, file string
		body       []byte
	}{{workspace.StatusFile, own.Status, statusMD}, {workspace.BudgetFile, own.Budget, budgetMD}} {
		if err := workspace.WriteArtifact(t.task.Workspace, a.file, a.body); err != nil {
			errs = append(errs, err)
		}
		if err := e.cfg.Store.SaveArtifact(ctx, t.task.ID, a.name, a.body); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
