// Package engine runs tasks iteration by iteration under their budget: it
// degrades in WARNING, stops dead at HARD, and records every call and every
// token in the store. It sees only interfaces: no concrete backend or store.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/prompt"
	"github.com/purser-dev/purser/redact"
	"github.com/purser-dev/purser/report"
)

// BackendResolver returns the backend a task names.
type BackendResolver func(purser.BackendSpec) (purser.Backend, error)

// RetryPolicy bounds the engine's retries of transient backend errors. Each
// retry is its own recorded call and passes the budget check first.
type RetryPolicy struct {
	Max  int           // retries after the first attempt
	Base time.Duration // first backoff; doubles each retry
}

// DefaultRetry retries twice, after 1s and 2s.
var DefaultRetry = RetryPolicy{Max: 2, Base: time.Second}

// DefaultReserveOutputTokens is the output a call is assumed to produce at
// most, for admission, when the backend cannot cap it more precisely.
const DefaultReserveOutputTokens = 8192

// Event tells an observer (the live view, the log) what the engine did.
type Event struct {
	TaskID    string
	Type      string // iteration, call, call_end, usage, tier, degrade, validator, stop
	Iteration int
	Call      purser.CallKind
	Message   string
	State     purser.TaskState // the task's state, on stop events
	Status    budget.Status    // the task's budget status after the event
	Run       *budget.Status   // the run's, when the task has a run budget
}

// Engine runs tasks.
type Engine struct {
	Store      purser.Store
	Backends   BackendResolver
	Validators purser.ValidatorRunner
	Context    *contextbuild.Builder
	Prices     *pricing.Catalogue
	Clock      budget.Clock // defaults to budget.SystemClock
	Logger     *slog.Logger // defaults to discarding
	Retry      RetryPolicy
	// ReserveOutputTokens is the worst-case output reserved per call;
	// defaults to DefaultReserveOutputTokens.
	ReserveOutputTokens int64
	// Observe, when set, is told of every event. It must not block.
	Observe func(Event)
	// Owner identifies this process in the task records (see
	// purser.TaskRecord.Owner).
	Owner string
	// Shared, when set, admits each call against the run budget through the
	// database too, so that processes sharing a run never jointly overrun it.
	Shared purser.SharedRunBudget
}

// StopError is returned by RunTask when a task did not finish DONE. Its
// cause is a *budget.BudgetExhaustedError or *budget.InsufficientBudgetError
// for a stop by budget (the task is BLOCKED), or the failure otherwise.
type StopError struct {
	TaskID string
	State  purser.TaskState
	Err    error
}

func (e *StopError) Error() string { return fmt.Sprintf("task %s %s: %v", e.TaskID, e.State, e.Err) }
func (e *StopError) Unwrap() error { return e.Err }

// IsBudgetStop reports whether err is a stop by budget.
func IsBudgetStop(err error) bool {
	var be *budget.BudgetExhaustedError
	return errors.As(err, &be) || errors.Is(err, budget.ErrInsufficientBudget)
}

// ErrInterrupted is the cause of a task stopped by its context (a signal);
// the task is left resumable.
var ErrInterrupted = errors.New("interrupted")

// errCallTimeout is the cause of a call cancelled by its backend's timeout.
var errCallTimeout = errors.New("call timeout")

// taskRun is the state of one task while it runs.
type taskRun struct {
	e       *Engine
	task    purser.Task
	runID   string
	backend purser.Backend
	budget  *budget.Manager
	log     *slog.Logger

	iteration   int
	plan        string
	failing     []purser.ValidatorResult
	history     []string
	feedback    string // problems with the agent's last answer, for the next call
	degradeSeen map[purser.DegradeAction]bool

	mu         sync.Mutex
	cancelCall context.CancelCauseFunc // the call in flight, if any
}

// RunTask runs a task until its validators pass (DONE), its budget stops it
// (BLOCKED) or it fails (FAILED). run is the run's budget, or nil. A task
// already in the store continues from what it spent: this is also resume.
// It returns nil only when the task is DONE, else a *StopError.
func (e *Engine) RunTask(ctx context.Context, task purser.Task, run *budget.Manager, runID string) error {
	e.defaults()
	log := e.Logger.With("task", task.ID)
	t := &taskRun{e: e, task: task, runID: runID, log: log, degradeSeen: map[purser.DegradeAction]bool{}}

	prior, err := e.Store.Task(ctx, task.ID)
	switch {
	case errors.Is(err, purser.ErrNotFound):
		prior = purser.TaskRecord{ID: task.ID, State: purser.StatePending}
	case err != nil:
		return &StopError{TaskID: task.ID, State: purser.StateFailed, Err: err}
	}
	totals, err := e.Store.UsageTotals(ctx, task.ID)
	if err != nil {
		return &StopError{TaskID: task.ID, State: purser.StateFailed, Err: err}
	}
	totals.Time = prior.Elapsed
	t.iteration = totals.Iterations
	if t.budget, err = budget.NewManager(task.Budget, budget.Options{Clock: e.Clock, Parent: run, Initial: totals}); err != nil {
		return &StopError{TaskID: task.ID, State: purser.StateFailed, Err: err}
	}
	rec := purser.TaskRecord{ID: task.ID, RunID: runID, Goal: task.Goal, Workspace: task.Workspace, File: task.File,
		Budget: task.Budget, State: purser.StateRunning, Elapsed: prior.Elapsed, Owner: e.Owner}
	if err := e.Store.SaveTask(ctx, rec); err != nil {
		return &StopError{TaskID: task.ID, State: purser.StateFailed, Err: err}
	}
	if err := t.markInterruptedCalls(ctx); err != nil {
		return &StopError{TaskID: task.ID, State: purser.StateFailed, Err: err}
	}
	if t.backend, err = e.Backends(task.Backend); err != nil {
		return t.finish(ctx, purser.StateFailed, fmt.Errorf("backend %s: %w", task.Backend.Name, err))
	}

	// The moment any recording crosses HARD, the call in flight is cancelled.
	onHard := func(c budget.Change) {
		e.emit(t, Event{Type: "tier", Message: fmt.Sprintf("%s budget: %s → %s by %s", c.Scope, c.From, c.To, c.Status.Cause)})
		if c.To == budget.Hard {
			t.cancelInFlight(fmt.Errorf("%s hard cap crossed by %s", c.Scope, c.Status.Cause))
		}
	}
	defer t.budget.OnChange(onHard)()
	if run != nil {
		defer run.OnChange(onHard)()
	}

	t.budget.StartClock()
	err = t.loop(ctx)
	t.budget.StopClock()
	switch {
	case err == nil:
		return t.finish(ctx, purser.StateDone, nil)
	case IsBudgetStop(err):
		return t.finish(ctx, purser.StateBlocked, err)
	case errors.Is(err, ErrInterrupted):
		return t.finish(ctx, purser.StatePending, err)
	}
	return t.finish(ctx, purser.StateFailed, err)
}

func (e *Engine) defaults() {
	if e.Clock == nil {
		e.Clock = budget.SystemClock
	}
	if e.Logger == nil {
		e.Logger = slog.New(slog.DiscardHandler)
	}
	if e.ReserveOutputTokens <= 0 {
		e.ReserveOutputTokens = DefaultReserveOutputTokens
	}
	if e.Prices == nil {
		e.Prices = pricing.New()
	}
}

func (e *Engine) emit(t *taskRun, ev Event) {
	if e.Observe == nil {
		return
	}
	ev.TaskID = t.task.ID
	if ev.Iteration == 0 {
		ev.Iteration = t.iteration
	}
	ev.Status = t.budget.Status()
	if p := t.budget.Parent(); p != nil {
		st := p.Status()
		ev.Run = &st
	}
	e.Observe(ev)
}

// markInterruptedCalls records calls that started but never ended — the
// process running them died — as interrupted. Their usage, made durable as
// it streamed, stands.
func (t *taskRun) markInterruptedCalls(ctx context.Context) error {
	calls, err := t.e.Store.Calls(ctx, t.task.ID)
	if err != nil {
		return err
	}
	for _, c := range calls {
		if c.Outcome != "" || !c.EndedAt.IsZero() {
			continue
		}
		c.Outcome = purser.CallInterrupted
		c.EndedAt = t.e.Clock.Now()
		c.Error = "Purser stopped mid-call (its process died); the usage recorded up to then stands"
		if err := t.e.Store.SaveCall(ctx, c); err != nil {
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

// loop runs iterations until DONE (nil) or a stop (the error).
func (t *taskRun) loop(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: %v", ErrInterrupted, context.Cause(ctx))
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

func (t *taskRun) runIteration(ctx context.Context) (done bool, err error) {
	e := t.e
	it := purser.IterationRecord{TaskID: t.task.ID, N: t.iteration, StartedAt: e.Clock.Now()}
	if err := e.Store.SaveIteration(ctx, it); err != nil {
		return false, err
	}
	e.emit(t, Event{Type: "iteration", Message: fmt.Sprintf("iteration %d starts", t.iteration)})
	t.log.Info("iteration starts", "iteration", t.iteration)

	stopped := func(err error) (bool, error) {
		it.EndedAt, it.Outcome = e.Clock.Now(), "stopped"
		it.Validators = t.failing
		// An iteration stopped by the budget ended, and counts. One cut by a
		// signal or a failure did not: a resume runs it again.
		if IsBudgetStop(err) {
			_ = t.record(context.WithoutCancel(ctx), "", purser.CallMain, budget.UsageEvent{IterationEnd: true}, fmt.Sprintf("%s/iter/%d/end", t.task.ID, t.iteration))
		} else {
			it.Outcome = "interrupted"
		}
		_ = e.Store.SaveIteration(context.WithoutCancel(ctx), it)
		return false, err
	}

	if t.task.Planning {
		if d := decideDegrade(t.task.Degrade, t.budget); d.on(purser.DisableSelfReview) {
			t.noteDegrade(ctx, d, purser.CallPlanning, purser.DisableSelfReview, "planning call skipped")
		} else {
			text, err := t.call(ctx, purser.CallPlanning)
			if err != nil {
				return stopped(err)
			}
			t.plan = text
		}
	}
	if _, err := t.call(ctx, purser.CallMain); err != nil {
		return stopped(err)
	}
	if t.task.SelfReview {
		if d := decideDegrade(t.task.Degrade, t.budget); d.on(purser.DisableSelfReview) {
			t.noteDegrade(ctx, d, purser.CallSelfReview, purser.DisableSelfReview, "self-review call skipped")
		} else if _, err := t.call(ctx, purser.CallSelfReview); err != nil {
			return stopped(err)
		}
	}
	// The hard cap may have been reached by the last call's final usage:
	// stop before the validators, at once.
	if err := t.budget.Check(); err != nil {
		return stopped(err)
	}

	results := make([]purser.ValidatorResult, 0, len(t.task.Validators))
	allPass := true
	for _, v := range t.task.Validators {
		r := e.Validators.RunValidator(ctx, t.task.Workspace, v)
		results = append(results, r)
		allPass = allPass && r.Passed
		e.emit(t, Event{Type: "validator", Message: fmt.Sprintf("validator %s: %s", v.Name, passText(r))})
		t.log.Info("validator", "iteration", t.iteration, "name", v.Name, "passed", r.Passed, "exit", r.ExitCode)
	}
	if ctx.Err() != nil {
		return stopped(fmt.Errorf("%w: %v", ErrInterrupted, context.Cause(ctx)))
	}
	it.Validators, it.EndedAt = results, e.Clock.Now()
	it.Outcome = "failed"
	if allPass {
		it.Outcome = "passed"
	}
	if err := t.record(ctx, "", purser.CallMain, budget.UsageEvent{IterationEnd: true}, fmt.Sprintf("%s/iter/%d/end", t.task.ID, t.iteration)); err != nil {
		return false, err
	}
	if err := e.Store.SaveIteration(ctx, it); err != nil {
		return false, err
	}
	if err := e.Store.SaveElapsed(ctx, t.task.ID, t.budget.Totals().Time); err != nil {
		return false, err
	}
	t.failing = nil
	for _, r := range results {
		if !r.Passed {
			t.failing = append(t.failing, r)
		}
	}
	t.history = append(t.history, fmt.Sprintf("Iteration %d: %d of %d validators passed.", t.iteration, len(results)-len(t.failing), len(results)))
	return allPass, nil
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

// noteDegrade records a degrade action the first time it is taken in this
// run of the task, with the tier and metric that caused it.
func (t *taskRun) noteDegrade(ctx context.Context, d degradeState, call purser.CallKind, a purser.DegradeAction, detail string) {
	first := !t.degradeSeen[a]
	t.degradeSeen[a] = true
	msg := fmt.Sprintf("degrade %s (%s): %s budget in %s by %s", a, detail, d.scope, d.tier, d.metric)
	if first {
		t.log.Warn("degrade", "action", a, "detail", detail, "tier", d.tier, "metric", d.metric, "scope", d.scope, "iteration", t.iteration)
	}
	_ = t.e.Store.SaveDegrade(ctx, purser.DegradeRecord{TaskID: t.task.ID, Iteration: t.iteration, Call: call, Action: a,
		Tier: d.tier, Metric: d.metric, Scope: d.scope, Detail: detail, At: t.e.Clock.Now()})
	t.e.emit(t, Event{Type: "degrade", Call: call, Message: msg})
}

// call makes one call of a kind, with the degrade decision taken from the
// budget at this moment, admission through a reservation, and retries of
// transient errors (each a call of its own, each admitted again).
func (t *taskRun) call(ctx context.Context, kind purser.CallKind) (string, error) {
	e := t.e
	var lastErr error
	for attempt := 1; attempt <= 1+e.Retry.Max; attempt++ {
		if attempt > 1 {
			backoff := e.Retry.Base << (attempt - 2)
			t.log.Warn("retrying after transient error", "call", kind, "attempt", attempt, "backoff", backoff, "error", lastErr)
			select {
			case <-ctx.Done():
				return "", fmt.Errorf("%w: %v", ErrInterrupted, context.Cause(ctx))
			case <-time.After(backoff):
			}
		}
		text, err := t.attempt(ctx, kind, attempt)
		if err == nil {
			return text, nil
		}
		// Never retried: a budget stop, an interruption, a fatal error.
		if IsBudgetStop(err) || errors.Is(err, ErrInterrupted) || !errors.Is(err, purser.ErrTransient) {
			return "", err
		}
		lastErr = err
	}
	return "", fmt.Errorf("%s call failed after %d attempts: %w", kind, 1+e.Retry.Max, lastErr)
}

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// attempt is one call to the backend.
func (t *taskRun) attempt(ctx context.Context, kind purser.CallKind, attempt int) (string, error) {
	e := t.e
	if err := t.budget.Check(); err != nil {
		return "", err
	}
	d := decideDegrade(t.task.Degrade, t.budget)
	tier := t.task.ModelTier
	if d.on(purser.SwitchTierCheap) && tier != purser.CheapTier {
		if _, ok := t.task.Backend.Model(purser.CheapTier); ok {
			t.noteDegrade(ctx, d, kind, purser.SwitchTierCheap, fmt.Sprintf("model tier %s → %s", tier, purser.CheapTier))
			tier = purser.CheapTier
		}
	}
	model, _ := t.task.Backend.Model(tier)

	in := contextbuild.Input{Goal: t.task.Goal, Issue: t.task.Issue, Workspace: t.task.Workspace,
		Failing: t.failing, Plan: t.plan, History: t.history, Feedback: t.feedback}
	var cctx contextbuild.Context
	if d.on(purser.ShrinkContext) {
		var err error
		if cctx, err = e.Context.Shrink(in, t.task.Degrade.Shrink.Strategy, t.task.Degrade.Shrink.MaxTokens); err != nil {
			return "", err
		}
		t.noteDegrade(ctx, d, kind, purser.ShrinkContext, fmt.Sprintf("context %s to %d tokens (cap %d)", cctx.Strategy, cctx.Tokens, t.task.Degrade.Shrink.MaxTokens))
	} else {
		cctx = e.Context.Full(in)
	}
	repairOnly := d.on(purser.RepairOnlyMode) && kind == purser.CallMain
	if repairOnly {
		t.noteDegrade(ctx, d, kind, purser.RepairOnlyMode, "repair-only prompt")
	}
	text := prompt.Build(prompt.Input{Kind: kind, Iteration: t.iteration, Context: cctx, RepairOnly: repairOnly, Validators: t.task.Validators})
	// A server may count the prompt a little differently than the o200k
	// tokenizer: the reservation allows for it.
	counted := int64(e.Context.Counter.Count(text))
	inputTokens := counted + counted/20 + 16

	callID := fmt.Sprintf("%s-%d-%s-%d-%s", t.task.ID, t.iteration, kind, attempt, newID())
	rec := purser.CallRecord{ID: callID, TaskID: t.task.ID, Iteration: t.iteration, Kind: kind, Attempt: attempt, Model: model,
		StartedAt: e.Clock.Now(), ContextTokens: cctx.Tokens}
	// refuse records a call the budget did not admit: nothing was sent.
	refuse := func(err error) (string, error) {
		rec.EndedAt, rec.Outcome, rec.Error = e.Clock.Now(), purser.CallRefused, redact.String(err.Error())
		_ = e.Store.SaveCall(ctx, rec)
		return "", err
	}

	// Admission: reserve the call's worst case; shrink it to what fits.
	want, maxOut := t.worstCase(model, inputTokens, e.ReserveOutputTokens)
	releaseShared, err := t.reserveShared(ctx, model, inputTokens, &want, &maxOut)
	rec.Reserved, rec.MaxOutputTokens = want, maxOut
	if err != nil {
		return refuse(err)
	}
	defer releaseShared()
	res, err := t.budget.Reserve(want)
	var short *budget.InsufficientBudgetError
	if errors.As(err, &short) {
		if want, maxOut, err = t.clampToFit(model, inputTokens, short.Available); err == nil {
			res, err = t.budget.Reserve(want)
		}
	}
	rec.Reserved, rec.MaxOutputTokens = want, maxOut
	if err != nil {
		return refuse(err)
	}
	defer res.Release()
	if err := e.Store.SaveCall(ctx, rec); err != nil {
		return "", err
	}

	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timeout := t.task.Backend.CallTimeout
	if timeout <= 0 {
		timeout = purser.DefaultCallTimeout
	}
	callCtx, cancelTimeout := context.WithTimeoutCause(callCtx, timeout, errCallTimeout)
	defer cancelTimeout()
	if deadline, ok := t.budget.HardDeadline(); ok {
		var cancelT context.CancelFunc
		callCtx, cancelT = context.WithDeadline(callCtx, deadline)
		defer cancelT()
	}
	t.mu.Lock()
	t.cancelCall = cancel
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.cancelCall = nil
		t.mu.Unlock()
	}()

	e.emit(t, Event{Type: "call", Call: kind, Message: fmt.Sprintf("%s call (attempt %d) to %s, %d context tokens", kind, attempt, model, cctx.Tokens)})
	var seq int
	var seqMu sync.Mutex
	var ledgerErr error
	report := func(ev budget.UsageEvent) {
		if ev.Model == "" {
			ev.Model = model
		}
		ev = e.Prices.Estimate(ev)
		seqMu.Lock()
		seq++
		key := fmt.Sprintf("%s/%d", callID, seq)
		seqMu.Unlock()
		// Durable in the ledger before the budget acts on it.
		if err := t.appendLedger(context.WithoutCancel(ctx), callID, kind, ev, key); err != nil {
			seqMu.Lock()
			ledgerErr = err
			seqMu.Unlock()
			cancel(err)
			return
		}
		res.Record(ev)
		e.emit(t, Event{Type: "usage", Call: kind})
	}
	// Skip the call entirely if the run or task hit HARD since the check.
	if err := t.budget.Check(); err != nil {
		return refuse(err)
	}
	var maxUSD budget.USD
	if avail := t.budget.Available(); avail.USD != budget.UnlimitedUSD {
		maxUSD = avail.USD + want.USD // what is left, this call's own reservation included
	}
	result, callErr := t.backend.Call(callCtx, purser.CallRequest{TaskID: t.task.ID, Kind: kind, Iteration: t.iteration, Attempt: attempt,
		Model: model, Prompt: text, ContextTokens: cctx.Tokens, MaxOutputTokens: maxOut, MaxUSD: maxUSD, Workspace: t.task.Workspace}, report)
	rec.EndedAt = e.Clock.Now()
	rec.Note = result.Note
	if kind == purser.CallMain {
		t.feedback = redact.String(result.Feedback)
	}
	seqMu.Lock()
	lerr := ledgerErr
	seqMu.Unlock()

	var stopErr error
	hardErr := t.budget.Check()
	switch {
	case lerr != nil:
		stopErr = fmt.Errorf("usage ledger: %w", lerr)
		rec.Outcome = purser.CallFailed
	case hardErr != nil:
		// The hard cap was crossed during the call: it was cancelled at once.
		stopErr = hardErr
		rec.Outcome = purser.CallCancelled
		if callErr == nil {
			rec.Outcome = purser.CallOK
		}
	case ctx.Err() != nil:
		stopErr = fmt.Errorf("%w: %v", ErrInterrupted, context.Cause(ctx))
		rec.Outcome = purser.CallCancelled
	case errors.Is(context.Cause(callCtx), errCallTimeout):
		// A hung call: cancelled, and worth a retry through the budget.
		stopErr = fmt.Errorf("%s call timed out after %s: %w", kind, timeout, purser.ErrTransient)
		rec.Outcome = purser.CallTransient
	case callErr != nil && errors.Is(callErr, purser.ErrTransient):
		stopErr = callErr
		rec.Outcome = purser.CallTransient
	case callErr != nil:
		stopErr = fmt.Errorf("%s call: %w", kind, callErr)
		rec.Outcome = purser.CallFailed
	default:
		rec.Outcome = purser.CallOK
	}
	if stopErr != nil {
		rec.Error = redact.String(stopErr.Error())
	}
	rec.Note = redact.String(rec.Note)
	if err := e.Store.SaveCall(context.WithoutCancel(ctx), rec); err != nil && stopErr == nil {
		stopErr = err
	}
	e.emit(t, Event{Type: "call_end", Call: kind, Message: fmt.Sprintf("%s call %s", kind, rec.Outcome)})
	if stopErr != nil {
		return "", stopErr
	}
	return result.Text, nil
}

// worstCase is what a call is reserved for: its input plus the most output
// it may produce, priced when the model has a price.
func (t *taskRun) worstCase(model string, input, output int64) (budget.Amount, int64) {
	ev := t.e.Prices.Estimate(budget.UsageEvent{Model: model, InputTokens: input, OutputTokens: output})
	a := budget.Amount{Tokens: input + output}
	if ev.CostSource == budget.CostEstimated {
		a.USD = ev.USD
	}
	return a, output
}

// sharedTTL bounds how long a hold on a shared run budget outlives a
// process that died holding it.
const sharedTTL = purser.DefaultCallTimeout + time.Minute

// reserveShared holds the call's worst case on a run budget shared through
// the database, shrinking the call to what fits there. It returns the
// function that releases the hold.
func (t *taskRun) reserveShared(ctx context.Context, model string, input int64, want *budget.Amount, maxOut *int64) (func(), error) {
	run := t.budget.Parent()
	if t.e.Shared == nil || run == nil || t.runID == "" {
		return func() {}, nil
	}
	cfg := run.Config()
	caps := budget.Unlimited
	if cfg.Hard.USD != nil {
		caps.USD = *cfg.Hard.USD
	}
	if cfg.Hard.Tokens != nil {
		caps.Tokens = *cfg.Hard.Tokens
	}
	if caps == budget.Unlimited {
		return func() {}, nil
	}
	ttl := t.task.Backend.CallTimeout + time.Minute
	if t.task.Backend.CallTimeout <= 0 {
		ttl = sharedTTL
	}
	release, err := t.e.Shared.ReserveRun(ctx, t.runID, caps, *want, ttl)
	var short *budget.InsufficientBudgetError
	if errors.As(err, &short) {
		local := t.budget.Available()
		avail := budget.Amount{USD: min(short.Available.USD, local.USD), Tokens: min(short.Available.Tokens, local.Tokens)}
		var w budget.Amount
		var out int64
		if w, out, err = t.clampToFit(model, input, avail); err == nil {
			*want, *maxOut = w, out
			release, err = t.e.Shared.ReserveRun(ctx, t.runID, caps, *want, ttl)
		}
		if err != nil {
			var short2 *budget.InsufficientBudgetError
			if errors.As(err, &short2) {
				short2.Scope = budget.ScopeRun
			}
		}
	}
	if err != nil {
		return func() {}, err
	}
	return release, nil
}

// minOutputTokens is the least output worth making a call for.
const minOutputTokens = 256

// clampToFit shrinks the call's output to what the budget has left, or says
// the call cannot be made at all.
func (t *taskRun) clampToFit(model string, input int64, avail budget.Amount) (budget.Amount, int64, error) {
	out := avail.Tokens - input
	if avail.Tokens == budget.Unlimited.Tokens {
		out = t.e.ReserveOutputTokens
	}
	for out >= minOutputTokens {
		want, _ := t.worstCase(model, input, out)
		if want.USD <= avail.USD && want.Tokens <= avail.Tokens {
			return want, out, nil
		}
		out = out * 3 / 4
	}
	least, _ := t.worstCase(model, input, minOutputTokens)
	metric := budget.Tokens
	if least.USD > avail.USD {
		metric = budget.Money
	}
	return budget.Amount{}, 0, &budget.InsufficientBudgetError{Metric: metric, Want: least, Available: avail}
}

func (t *taskRun) appendLedger(ctx context.Context, callID string, kind purser.CallKind, ev budget.UsageEvent, key string) error {
	return t.e.Store.AppendUsage(ctx, purser.LedgerEntry{Key: key, TaskID: t.task.ID, RunID: t.runID, CallID: callID,
		Iteration: t.iteration, Kind: kind, Event: ev, At: t.e.Clock.Now()})
}

// record puts an event that is not part of a call (an iteration's end) in
// the ledger and on the budget.
func (t *taskRun) record(ctx context.Context, callID string, kind purser.CallKind, ev budget.UsageEvent, key string) error {
	if err := t.appendLedger(ctx, callID, kind, ev, key); err != nil {
		return err
	}
	t.budget.RecordUsage(ev)
	return nil
}

// finish records the task's final state and writes STATUS.md and BUDGET.md
// at the workspace root and in the store. The workspace is otherwise left
// exactly as it is: nothing is reverted, reset or cleaned.
func (t *taskRun) finish(ctx context.Context, state purser.TaskState, cause error) error {
	e := t.e
	ctx = context.WithoutCancel(ctx) // a signal must not stop the bookkeeping
	reason := "all validators passed"
	if cause != nil {
		reason = redact.String(cause.Error())
	}
	var errs []error
	if t.budget != nil {
		if err := e.Store.SaveElapsed(ctx, t.task.ID, t.budget.Totals().Time); err != nil {
			errs = append(errs, err)
		}
	}
	if err := e.Store.SetTaskState(ctx, t.task.ID, state, reason); err != nil {
		errs = append(errs, err)
	}
	if t.budget != nil {
		if err := t.writeArtifacts(ctx, state, cause); err != nil {
			errs = append(errs, err)
		}
		e.emit(t, Event{Type: "stop", State: state, Message: fmt.Sprintf("%s: %s", state, reason)})
	}
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

func (t *taskRun) writeArtifacts(ctx context.Context, state purser.TaskState, cause error) error {
	e := t.e
	r, err := report.Load(ctx, e.Store, t.task.ID)
	if err != nil {
		return err
	}
	r.Task = t.task
	r.State = state
	r.Cause = cause
	r.Status = t.budget.Status()
	if p := t.budget.Parent(); p != nil {
		st := p.Status()
		r.RunStatus = &st
		r.RunBudget = p.Config()
	}
	var errs []error
	for name, body := range map[string][]byte{"STATUS.md": report.StatusMD(r), "BUDGET.md": report.BudgetMD(r)} {
		if err := contextbuild.WriteArtifact(t.task.Workspace, name, body); err != nil {
			errs = append(errs, err)
		}
		if err := e.Store.SaveArtifact(ctx, t.task.ID, name, body); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Describe is a one-line summary of a stop for logs.
func Describe(err error) string {
	var se *StopError
	if errors.As(err, &se) {
		return strings.ToLower(string(se.State)) + ": " + se.Err.Error()
	}
	return err.Error()
}
