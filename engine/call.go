package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/redact"
)

// call makes one call of a kind, with the degrade decision taken from the
// budget at this moment, admission through a reservation, and retries of
// transient errors (each a call of its own, each admitted again).
func (t *taskRun) call(ctx context.Context, kind purser.CallKind) (string, error) {
	retry := t.e.cfg.Retry
	var lastErr error
	var sent *preparedCall // the attempt retried: its prompt may be cached
	for attempt := 1; attempt <= 1+retry.Max; attempt++ {
		if attempt > 1 {
			backoff := retry.Base << (attempt - 2)
			// A provider that said when to come back (a 429's Retry-After)
			// is not asked sooner.
			var hint interface{ RetryAfterHint() time.Duration }
			if errors.As(lastErr, &hint) && hint.RetryAfterHint() > backoff {
				backoff = hint.RetryAfterHint()
			}
			t.log.Warn("retrying after transient error", "call", kind, "attempt", attempt, "backoff", backoff, "error", lastErr)
			select {
			case <-ctx.Done():
				return "", interrupted(ctx)
			case <-time.After(backoff):
			}
		}
		text, pc, err := t.attempt(ctx, kind, attempt, sent)
		if pc != nil && (sent == nil || pc.reached.Load() || !sent.reached.Load()) {
			sent = pc // the last attempt that reached the provider, if any
		}
		if err == nil {
			return text, nil
		}
		// Never retried: a budget stop, an interruption, a fatal error.
		if IsBudgetStop(err) || errors.Is(err, ErrInterrupted) || !errors.Is(err, purser.ErrTransient) {
			return "", err
		}
		lastErr = err
	}
	return "", fmt.Errorf("%s call failed after %d attempts: %w", kind, 1+retry.Max, lastErr)
}

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// preparedCall is one attempt at a call, built and not yet admitted.
type preparedCall struct {
	kind   purser.CallKind
	model  string
	prompt string
	input  int64 // the prompt's tokens as reserved, with a margin
	ctx    contextbuild.Context
	rec    purser.CallRecord
	// releaseDB gives back the call's holds on the run shared through the
	// database and on named budgets (once; nil until admitted).
	releaseDB func()
	// reached: a reply's input was billed, so the provider has the prompt
	// (cached, if the agent marks it): a retry judges changing it (degrade.go).
	reached atomic.Bool
}

// attempt is one call to the backend: prepared under the degrade policy,
// admitted against the budget, made, and recorded.
// It returns the attempt as prepared (nil when none was), which a retry
// judges its degrade on.
func (t *taskRun) attempt(ctx context.Context, kind purser.CallKind, attempt int, sent *preparedCall) (string, *preparedCall, error) {
	if err := t.budget.Check(); err != nil {
		return "", nil, err
	}
	pc, err := t.prepare(ctx, kind, attempt, sent)
	if err != nil {
		return "", nil, err
	}
	refuse := func(err error) (string, *preparedCall, error) {
		text, err := t.refuse(ctx, pc, err)
		return text, pc, err
	}
	if err := t.checkPriced(ctx, pc); err != nil {
		return refuse(err)
	}
	res, release, err := t.admit(ctx, pc)
	if err != nil {
		return refuse(err)
	}
	defer release()
	if err := t.e.cfg.Store.SaveCall(ctx, pc.rec); err != nil {
		return "", pc, err
	}
	// Skip the call entirely if the run or task hit HARD since the check.
	if err := t.budget.Check(); err != nil {
		return refuse(err)
	}
	text, err := t.makeCall(ctx, pc, res)
	return text, pc, err
}

// prepare takes the degrade decision for this call, and builds its context,
// prompt and record.
func (t *taskRun) prepare(ctx context.Context, kind purser.CallKind, attempt int, sent *preparedCall) (*preparedCall, error) {
	e := t.e
	d := t.degrade()
	tier := t.task.ModelTier
	if d.on(purser.SwitchTierCheap) && tier != purser.CheapTier {
		if cheap, ok := t.task.Backend.Model(purser.CheapTier); ok {
			// Judged on the bill, cache included (degrade.go).
			standard, _ := t.task.Backend.Model(tier)
			take, why := t.judgeSwitch(ctx, standard, cheap)
			what := fmt.Sprintf("model tier %s → %s", tier, purser.CheapTier)
			switch {
			case !take:
				t.noteDegrade(ctx, d, kind, purser.SwitchTierCheap, "not taken: "+what+": "+why)
				t.switches.decline(t.iteration, kind)
			case why != "":
				t.noteDegrade(ctx, d, kind, purser.SwitchTierCheap, what+": "+why)
				tier = purser.CheapTier
			default:
				t.noteDegrade(ctx, d, kind, purser.SwitchTierCheap, what)
				tier = purser.CheapTier
			}
		}
	}
	model, _ := t.task.Backend.Model(tier)

	in := contextbuild.Input{Goal: t.task.Goal, Issue: t.task.Issue, Workspace: t.task.Workspace,
		Failing: t.failing, Plan: t.plan, History: t.history, HistoryOmitted: t.historyOmitted, Feedback: t.feedback, Guard: e.cfg.Guard}
	cctx, text, err := t.degradePrompt(ctx, d, kind, in, model, sent) // degrade.go
	if err != nil {
		return nil, err
	}
	// A server may count the prompt a little differently than the o200k
	// tokenizer: the reservation allows for it. Counted line by line: most
	// of a prompt's lines were the last call's too.
	counted := int64(e.cfg.Context.CountPrompt(text))
	callID := fmt.Sprintf("%s-%d-%s-%d-%s", t.task.ID, t.iteration, kind, attempt, newID())
	return &preparedCall{kind: kind, model: model, prompt: text, input: counted + counted/20 + 16, ctx: cctx,
		rec: purser.CallRecord{ID: callID, TaskID: t.task.ID, Iteration: t.iteration, Kind: kind, Attempt: attempt, Model: redact.String(model),
			StartedAt: e.cfg.Clock.Now(), ContextTokens: cctx.Tokens}}, nil
}

// refuse records a call the budget did not admit: nothing was sent.
func (t *taskRun) refuse(ctx context.Context, pc *preparedCall, err error) (string, error) {
	pc.rec.EndedAt, pc.rec.Outcome, pc.rec.Error = t.e.cfg.Clock.Now(), purser.CallRefused, redact.String(err.Error())
	_ = t.e.cfg.Store.SaveCall(ctx, pc.rec)
	return "", err
}

// stallTimeout is the task backend's stall timeout, else the engine's
// (never negative).
func (t *taskRun) stallTimeout() time.Duration {
	stall := t.task.Backend.StallTimeout
	if stall == 0 {
		stall = t.e.cfg.StallTimeout
	}
	return max(stall, 0)
}

// recoverCut counts what a call the hard cap cut mid-reply was delivered:
// what the provider sent and the CLI kept in its session file counts,
// read or not.
func (t *taskRun) recoverCut(ctx context.Context, pc *preparedCall) {
	if calls, err := t.e.cfg.Store.Calls(ctx, t.task.ID); err == nil {
		t.recoverSpend(ctx, &pc.rec, calls, "cut by the hard cap")
	}
}

// makeCall sends an admitted call to the backend, with usage made durable in
// the ledger and recorded on the reservation as it streams in, and records
// how it ended.
func (t *taskRun) makeCall(ctx context.Context, pc *preparedCall, res *budget.Reservation) (string, error) {
	e := t.e
	callCtx, cancel, timeout := t.callContext(ctx)
	defer cancel(nil)
	t.setInFlight(cancel)
	defer t.setInFlight(nil)

	e.emit(t, purser.Event{Type: purser.EventCall, Call: pc.kind, Message: fmt.Sprintf("%s call (attempt %d) to %s, %d context tokens", pc.kind, pc.rec.Attempt, pc.model, pc.ctx.Tokens)})
	usage := newUsageSink(context.WithoutCancel(ctx), t, pc, res, cancel)
	defer usage.close() // a report after the call waits for its own commit
	// Each model request the agent sends through Purser's door is admitted
	// on its own (wire.go), borrowing this call's hold first.
	door := newWireAdmitter(t, pc, res, callCtx, cancel)
	defer door.close()
	usage.door = door
	maxUSD := t.callMaxUSD(pc.rec.Reserved.USD)
	// The call's process is recorded before the agent sends anything, so a
	// resume after a crash can end what is left of it.
	// So is its session file, as soon as the backend knows it: a resume
	// reads what the call spent from it. The two may come from different
	// goroutines of the backend.
	var recMu sync.Mutex
	saveRec := func(what string, set func()) {
		recMu.Lock()
		defer recMu.Unlock()
		set()
		if err := e.cfg.Store.SaveCall(context.WithoutCancel(ctx), pc.rec); err != nil {
			t.log.Warn("recording the call's "+what, "error", err)
		}
	}
	hooks := purser.CallHooks{
		OnStarted: func(process string) { saveRec("process", func() { pc.rec.Process = process }) },
		OnSession: func(file string) { saveRec("session file", func() { pc.rec.Session = file }) },
		OnWire:    func(journal string) { saveRec("wire journal", func() { pc.rec.Wire = journal }) },
		OnInnerRetry: func() {
			recMu.Lock()
			pc.rec.InnerRetries++
			recMu.Unlock()
			t.log.Warn("the agent retried a request by itself", "call", pc.kind, "attempt", pc.rec.Attempt)
		},
		Admit: door,
	}
	result, callErr := t.backend.Call(callCtx, purser.CallRequest{TaskID: t.task.ID, Kind: pc.kind, Iteration: t.iteration, Attempt: pc.rec.Attempt,
		Model: pc.model, Prompt: pc.prompt, ContextTokens: pc.ctx.Tokens, MaxOutputTokens: pc.rec.MaxOutputTokens, MaxUSD: maxUSD,
		Workspace: t.task.Workspace, Guard: e.cfg.Guard, Price: usage.price, StallTimeout: t.stallTimeout(), Hooks: hooks}, usage.report)
	// The call's end is judged, recorded and its holds released on what is
	// in the ledger: everything it reported is committed first.
	usage.flush()
	// The backend has returned; a goroutine of it that outlived its call
	// may not write the record now.
	recMu.Lock()
	defer recMu.Unlock()
	pc.rec.EndedAt = e.cfg.Clock.Now()
	if pc.kind == purser.CallMain {
		t.feedback = redact.String(result.Feedback)
	}
	stopErr := t.outcome(ctx, callCtx, pc, usage.err(), callErr, timeout)
	if stopErr != nil {
		pc.rec.Error = redact.String(stopErr.Error())
	}
	pc.rec.Note = redact.String(result.Note)
	if pc.rec.Outcome == purser.CallCancelled && IsBudgetStop(stopErr) {
		t.recoverCut(context.WithoutCancel(ctx), pc)
	}
	if err := e.cfg.Store.SaveCall(context.WithoutCancel(ctx), pc.rec); err != nil && stopErr == nil {
		stopErr = err
	}
	e.emit(t, purser.Event{Type: purser.EventCallEnd, Call: pc.kind, Message: fmt.Sprintf("%s call %s", pc.kind, pc.rec.Outcome)})
	t.updateForecast(ctx) // after every call, on what it spent
	if stopErr != nil {
		return "", stopErr
	}
	return result.Text, nil
}

// callContext bounds a call by the backend's call timeout and the budget's
// time cap; its cancel function is what the hard cap calls.
func (t *taskRun) callContext(ctx context.Context) (context.Context, context.CancelCauseFunc, time.Duration) {
	callCtx, cancel := context.WithCancelCause(ctx)
	timeout := t.task.Backend.CallTimeout
	if timeout <= 0 {
		timeout = purser.DefaultCallTimeout
	}
	callCtx, cancelTimeout := context.WithTimeoutCause(callCtx, timeout, errCallTimeout)
	cancelDeadline := context.CancelFunc(func() {})
	if deadline, ok := t.budget.HardDeadline(); ok {
		callCtx, cancelDeadline = context.WithDeadline(callCtx, deadline)
	}
	return callCtx, func(cause error) { cancel(cause); cancelTimeout(); cancelDeadline() }, timeout
}

// outcome classifies how a call ended, sets it on the record, and returns
// the error the iteration stops with (nil: the call is done).
func (t *taskRun) outcome(ctx, callCtx context.Context, pc *preparedCall, ledgerErr, callErr error, timeout time.Duration) error {
	hardErr := t.budget.Check()
	if named := t.takeNamedStop(); hardErr == nil {
		hardErr = named
	}
	if refused := t.takeWireStop(); hardErr == nil {
		hardErr = refused
	}
	switch {
	case ledgerErr != nil:
		pc.rec.Outcome = purser.CallFailed
		return fmt.Errorf("usage ledger: %w", ledgerErr)
	case hardErr != nil:
		// The hard cap was crossed during the call: it was cancelled at once.
		pc.rec.Outcome = purser.CallCancelled
		if callErr == nil {
			pc.rec.Outcome = purser.CallOK
		}
		return hardErr
	case ctx.Err() != nil:
		pc.rec.Outcome = purser.CallCancelled
		return interrupted(ctx)
	case errors.Is(context.Cause(callCtx), errCallTimeout):
		// A hung call: cancelled, and worth a retry through the budget.
		pc.rec.Outcome = purser.CallTransient
		return fmt.Errorf("%s call timed out after %s: %w", pc.kind, timeout, purser.ErrTransient)
	case callErr != nil && errors.Is(callErr, purser.ErrStalled):
		// Nothing came for the stall window: ended, and worth a retry.
		pc.rec.Outcome = purser.CallStalled
		return fmt.Errorf("%s call: %w", pc.kind, callErr)
	case callErr != nil && errors.Is(callErr, purser.ErrTransient):
		pc.rec.Outcome = purser.CallTransient
		return callErr
	case callErr != nil:
		pc.rec.Outcome = purser.CallFailed
		return fmt.Errorf("%s call: %w", pc.kind, callErr)
	}
	pc.rec.Outcome = purser.CallOK
	return nil
}

// usageSink receives a call's usage from the backend's goroutines: each
// event is priced and recorded on the reservation at once (which may cross
// HARD and cancel the call), and appended to the ledger behind it
// (ledgerwrite.go), in the order reported.
type usageSink struct {
	ctx    context.Context // the task's, without its cancellation: bookkeeping outlives a stop
	t      *taskRun
	pc     *preparedCall
	res    *budget.Reservation
	cancel context.CancelCauseFunc
	door   *wireAdmitter // notes each reply's cache traffic for the wire's degrade
	ledger *ledgerWriter
	remove func()   // takes ledger off the task's pending writers
	draws  []string // the named budgets the call was admitted against

	mu  sync.Mutex // orders the events: a key's number is its place in the ledger
	seq int

	errMu     sync.Mutex
	ledgerErr error
}

func newUsageSink(ctx context.Context, t *taskRun, pc *preparedCall, res *budget.Reservation, cancel context.CancelCauseFunc) *usageSink {
	// The call's draws, as admitted: its events are checked against them
	// on the ledger writer's goroutine, while the next call may be
	// admitted (and t.draws set) already.
	u := &usageSink{ctx: ctx, t: t, pc: pc, res: res, cancel: cancel, draws: slices.Clone(t.draws)}
	u.ledger = newLedgerWriter(ctx, t.e.cfg.Store, u.committed)
	if len(u.draws) > 0 {
		u.ledger.mustWait() // ledgerwrite.go: named budgets are judged on the ledger
	}
	u.remove = t.e.runs.pending.add(t.task.ID, u.ledger)
	return u
}

// price is the one place a call's usage is priced: backends report tokens
// and only a cost their provider reported; Claude Code settles its reported
// total against this same function (CallRequest.Price).
func (u *usageSink) price(ev budget.UsageEvent) budget.UsageEvent {
	if ev.Model == "" {
		ev.Model = u.pc.model
	}
	return u.t.e.cfg.Prices.Estimate(ev)
}

func (u *usageSink) report(ev budget.UsageEvent) {
	t := u.t
	ev = t.asBilled(u.price(ev))
	u.res.Record(ev)
	if ev.InputTokens > 0 {
		u.pc.reached.Store(true)
	}
	if u.door != nil {
		u.door.observe(ev)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seq++
	en := t.ledgerEntry(u.pc.rec.ID, u.pc.kind, ev, fmt.Sprintf("%s/%d", u.pc.rec.ID, u.seq))
	t.switches.observe(t, en, u.pc.rec.ContextTokens)
	if err := u.ledger.append(en); err != nil {
		u.fail(err)
	}
}

// committed is told of each of the call's ledger transactions: a failure
// cancels the call; committed events are checked against the named
// budgets (their spend is the ledger's) and told to observers.
func (u *usageSink) committed(batch []purser.LedgerEntry, err error) {
	if err != nil {
		u.fail(err)
		return
	}
	for i := len(batch) - 1; i >= 0; i-- {
		if ev := batch[i].Event; ev.USD != 0 || ev.InputTokens+ev.OutputTokens != 0 {
			u.t.checkNamedSpend(u.ctx, u.draws, ev, u.cancel) // one read of the named budgets per transaction
			break
		}
	}
	for range batch {
		u.t.e.emit(u.t, purser.Event{Type: purser.EventUsage, Call: u.pc.kind})
	}
}

func (u *usageSink) fail(err error) {
	u.errMu.Lock()
	if u.ledgerErr == nil {
		u.ledgerErr = err
	}
	u.errMu.Unlock()
	u.cancel(err)
}

// flush waits for the call's events to be committed.
func (u *usageSink) flush() {
	if err := u.ledger.flush(); err != nil {
		u.fail(err)
	}
}

// close flushes and leaves the task's pending writers.
func (u *usageSink) close() {
	if err := u.ledger.close(); err != nil {
		u.fail(err)
	}
	u.remove()
}

func (u *usageSink) err() error {
	u.errMu.Lock()
	defer u.errMu.Unlock()
	return u.ledgerErr
}
