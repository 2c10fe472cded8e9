package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// worstCase is what a call is reserved for: its input plus the most output
// it may produce, priced when the model has a price and the backend bills
// per token.
func (t *taskRun) worstCase(model string, input, output int64) (budget.Amount, int64) {
	ev := t.e.cfg.Prices.Estimate(budget.UsageEvent{Model: model, InputTokens: input, OutputTokens: output})
	a := budget.Amount{Tokens: input + output}
	// A flat-rate plan's dollars are list prices: nothing to hold against a
	// money cap.
	if ev.CostSource == budget.CostEstimated && !t.task.Backend.Subscription() {
		a.USD = ev.USD
	}
	return a, output
}

// sharedTTL bounds how long a hold on a shared run budget outlives a
// process that died holding it.
const sharedTTL = purser.DefaultCallTimeout + time.Minute

// holdTTL is how long this task's holds on shared budgets outlive a
// process that died holding them: the call's timeout and a minute.
func (t *taskRun) holdTTL() time.Duration {
	if t.task.Backend.CallTimeout <= 0 {
		return sharedTTL
	}
	return t.task.Backend.CallTimeout + time.Minute
}

// callSize is what a call is admitted for: its worst case, held on every
// budget, and the most output it may produce, which the backend is told.
type callSize struct {
	want   budget.Amount
	maxOut int64
}

// admit reserves the call's worst case on the run shared through the
// database, then on the task and its run in this process, shrinking the
// call's output to what fits. It returns the reservation and the function
// that releases every hold; the call's record says what was reserved, a
// refused call's too.
func (t *taskRun) admit(ctx context.Context, pc *preparedCall) (*budget.Reservation, func(), error) {
	want, maxOut := t.worstCase(pc.model, pc.input, t.e.cfg.ReserveOutputTokens)
	size, releaseShared, err := t.reserveShared(ctx, pc.model, pc.input, callSize{want: want, maxOut: maxOut})
	pc.rec.Reserved, pc.rec.MaxOutputTokens = size.want, size.maxOut
	if err != nil {
		return nil, nil, err
	}
	res, err := t.budget.Reserve(size.want)
	var short *budget.InsufficientBudgetError
	if errors.As(err, &short) {
		if size, err = t.clampToFit(pc.model, pc.input, short.Available); err == nil {
			res, err = t.budget.Reserve(size.want)
		}
	}
	pc.rec.Reserved, pc.rec.MaxOutputTokens = size.want, size.maxOut
	if err != nil {
		releaseShared()
		return nil, nil, err
	}
	// The door may give the shared holds back early (wire.go).
	pc.releaseDB = sync.OnceFunc(releaseShared)
	return res, func() { res.Release(); pc.releaseDB() }, nil
}

// reserveShared holds the call's worst case on its run's budget shared
// through the database and on every named budget the run draws from,
// shrinking the call to what fits in all of them, and waits while only
// other calls' holds stand in the way. It returns the size admitted (the
// last one tried when refused) and the function that releases every hold.
func (t *taskRun) reserveShared(ctx context.Context, model string, input int64, first callSize) (callSize, func(), error) {
	var names []string
	if t.e.cfg.Named != nil && t.runID != "" {
		var err error
		if names, err = t.e.cfg.Named.RunDraws(ctx, t.runID); err != nil {
			return first, func() {}, err
		}
	}
	t.draws, t.namedRoom = names, budget.UnlimitedUSD
	if len(names) == 0 {
		return t.reserveRun(ctx, model, input, first)
	}
	w := holdWaiter{t: t}
	for {
		size, err := t.fitNamed(ctx, names, model, input, first)
		if err == nil {
			var releaseRun, releaseNamed func()
			if size, releaseRun, err = t.reserveRun(ctx, model, input, size); err != nil {
				return size, func() {}, err
			}
			if releaseNamed, err = t.holdNamed(ctx, names, size.want); err == nil {
				return size, func() { releaseNamed(); releaseRun() }, nil
			}
			releaseRun()
		}
		if !errors.Is(err, errHeldByOthers) {
			return size, func() {}, err
		}
		if err := w.wait(ctx, fmt.Sprintf("waiting: other calls hold what named budgets %s have left under their caps", strings.Join(names, ", "))); err != nil {
			return size, func() {}, err
		}
	}
}

// errHeldByOthers: a named budget's spend leaves room for the call, but
// calls in flight hold that room; they end soon (or their holds lapse).
var errHeldByOthers = errors.New("named budget held by calls in flight")

// fitNamed shrinks the call to what every named budget has left after its
// window's spend and the holds on it. When even the least worthwhile call
// does not fit, it says whether spend refuses it — a
// *budget.InsufficientBudgetError naming the budget, which stops the task —
// or only holds do (errHeldByOthers); the size is then first, unchanged.
func (t *taskRun) fitNamed(ctx context.Context, names []string, model string, input int64, first callSize) (callSize, error) {
	now := t.e.cfg.Clock.Now()
	avail := budget.Unlimited
	for _, name := range names {
		st, err := t.e.cfg.Named.NamedBudgetStatus(ctx, name, now)
		if err != nil {
			return first, err
		}
		bySpend := budget.Headroom(st.Caps(), st.Spent.Amount(), budget.Amount{})
		if m := budget.Reached(st.Caps(), st.Spent.Amount()); m != budget.NoMetric {
			// Spent to its cap: nothing more is admitted, even a call whose
			// price is unknown (its worst case holds no dollars).
			least, _ := t.worstCase(model, input, budget.MinOutputTokens)
			return first, &budget.InsufficientBudgetError{Scope: budget.ScopeNamed, Name: name, Metric: m, Want: least, Available: bySpend, Named: st.Standing()}
		}
		if _, err := t.clampToFit(model, input, bySpend); err != nil {
			var short *budget.InsufficientBudgetError
			if errors.As(err, &short) {
				short.Scope, short.Name, short.Named = budget.ScopeNamed, name, st.Standing()
			}
			return first, err
		}
		avail = avail.Min(st.Headroom())
	}
	t.namedRoom = avail.USD
	if first.want.FitsIn(avail) {
		return first, nil
	}
	size, err := t.clampToFit(model, input, avail)
	if err != nil {
		return first, errHeldByOthers
	}
	return size, nil
}

// holdNamed holds want on every named budget (and so their ancestors), or
// on none, in one store transaction: a hold refused (another call took the
// room since fitNamed looked) is retried from fitNamed.
func (t *taskRun) holdNamed(ctx context.Context, names []string, want budget.Amount) (func(), error) {
	release, err := t.e.cfg.Named.ReserveNamedAll(ctx, names, t.holder(), want, t.e.cfg.Clock.Now(), t.holdTTL())
	if errors.Is(err, budget.ErrInsufficientBudget) {
		return nil, errHeldByOthers
	}
	return release, err
}

// reserveRun holds the call's worst case on a run budget shared through
// the database, shrinking the call to what fits there, and waits while only
// other processes' holds stand in the way. It returns the size held (the
// last one tried when refused) and the function that releases the hold.
func (t *taskRun) reserveRun(ctx context.Context, model string, input int64, first callSize) (callSize, func(), error) {
	run := t.budget.Parent()
	if t.e.cfg.Shared == nil || run == nil || t.runID == "" {
		return first, func() {}, nil
	}
	// The same caps the run's Manager admits by in this process.
	caps := budget.CapsOf(run.Config())
	if caps == budget.Unlimited {
		return first, func() {}, nil
	}
	ttl := t.holdTTL()
	w := holdWaiter{t: t}
	for {
		// Each attempt starts from the call's whole worst case.
		size, release, err := t.holdShared(ctx, model, input, caps, ttl, first)
		var short *budget.InsufficientBudgetError
		if err == nil || !errors.As(err, &short) || !t.heldByOthers(model, input) {
			if err != nil {
				return size, func() {}, err
			}
			return size, release, nil
		}
		// What stands in the way is other calls' holds, not spend: they end
		// soon (or lapse after their TTL), so the call waits for them
		// rather than stopping a task the run could still afford.
		if err := w.wait(ctx, fmt.Sprintf("waiting: other calls hold what run %s has left under its cap (their holds end with their calls, or lapse after %s)", t.runID, ttl)); err != nil {
			return size, func() {}, err
		}
	}
}

// holdPoll and maxHoldPoll pace the retries of a call waiting for other
// calls' holds on a shared run or a named budget to be released.
const (
	holdPoll    = 50 * time.Millisecond
	maxHoldPoll = time.Second
)

// holdWaiter paces a call waiting for other calls' holds to end (50 ms,
// doubling to 1 s), and says once, in the log and the live view, that it
// waits. Each time, it drops the holds of holders that are gone
// (reapDeadHolds) rather than wait out their TTL.
type holdWaiter struct {
	t     *taskRun
	pause time.Duration
}

// wait says why the call waits (the first time), then sleeps the next
// pause; it returns the interruption when ctx ends first.
func (w *holdWaiter) wait(ctx context.Context, why string) error {
	if w.pause == 0 {
		w.pause = holdPoll
		w.t.log.Info(why, "run", w.t.runID)
		w.t.e.emit(w.t, purser.Event{Type: purser.EventWarning, Message: why})
	} else {
		w.pause = min(2*w.pause, maxHoldPoll)
	}
	// Holds a gone holder left end now, not after their TTL: try again at
	// once.
	if w.t.reapDeadHolds(ctx) {
		return nil
	}
	select {
	case <-ctx.Done():
		return interrupted(ctx)
	case <-time.After(w.pause):
		return nil
	}
}

// holder is who the task's holds are recorded as: this process, for this
// task, so that if the process dies, whoever resumes the task can drop them.
func (t *taskRun) holder() purser.Holder {
	return purser.Holder{Owner: t.e.owner, TaskID: t.task.ID}
}

// holdShared makes one attempt at holding the call on the shared run,
// shrinking it to what the run has left when its worst case does not fit.
// It returns the size it tried last.
func (t *taskRun) holdShared(ctx context.Context, model string, input int64, caps budget.Amount, ttl time.Duration, size callSize) (callSize, func(), error) {
	release, err := t.e.cfg.Shared.ReserveRun(ctx, t.runID, t.holder(), caps, size.want, ttl)
	var short *budget.InsufficientBudgetError
	if errors.As(err, &short) {
		avail := short.Available.Min(t.budget.Available())
		var clamped callSize
		if clamped, err = t.clampToFit(model, input, avail); err == nil {
			size = clamped
			release, err = t.e.cfg.Shared.ReserveRun(ctx, t.runID, t.holder(), caps, size.want, ttl)
		}
		if err != nil {
			var short2 *budget.InsufficientBudgetError
			if errors.As(err, &short2) {
				short2.Scope = budget.ScopeRun
			}
		}
	}
	return size, release, err
}

// heldByOthers reports whether the least worthwhile call would fit in what
// the run and the task have left by their spend (every process's, as last
// read from the store) and this process's own holds — so that only other
// processes' holds refused it.
func (t *taskRun) heldByOthers(model string, input int64) bool {
	avail := t.budget.Parent().Available().Min(t.budget.Available())
	_, err := t.clampToFit(model, input, avail)
	return err == nil
}

// clampToFit shrinks the call's output to what avail holds (by
// budget.ClampOutput, priced as this task's backend bills), or says the
// call cannot be made at all.
func (t *taskRun) clampToFit(model string, input int64, avail budget.Amount) (callSize, error) {
	want, out, err := budget.ClampOutput(avail, input, t.e.cfg.ReserveOutputTokens, func(output int64) budget.Amount {
		w, _ := t.worstCase(model, input, output)
		return w
	})
	return callSize{want: want, maxOut: out}, err
}

// checkNamedSpend is run as each usage event of a call lands in the
// ledger: when the spend of a named budget the call was admitted against
// (every run's, in its window, this event included) has reached a hard
// cap, the call is cancelled and the task stops, naming the budget.
// Admission can clamp only what it can price; reported dollars count as
// they arrive. A store error leaves the call to admission's bounds.
func (t *taskRun) checkNamedSpend(ctx context.Context, draws []string, ev budget.UsageEvent, cancel context.CancelCauseFunc) {
	if len(draws) == 0 || (ev.USD == 0 && ev.InputTokens+ev.OutputTokens == 0) {
		return
	}
	now := t.e.cfg.Clock.Now()
	for _, name := range draws {
		st, err := t.e.cfg.Named.NamedBudgetStatus(ctx, name, now)
		if err != nil {
			t.log.Warn("reading named budget's spend during a call", "budget", name, "error", err)
			return
		}
		m := budget.Reached(st.Caps(), st.Spent.Amount())
		if m == budget.NoMetric {
			continue
		}
		stop := &budget.InsufficientBudgetError{Scope: budget.ScopeNamed, Name: name, Metric: m,
			Available: budget.Headroom(st.Caps(), st.Spent.Amount(), budget.Amount{}), Named: st.Standing()}
		t.mu.Lock()
		first := t.namedStop == nil
		if first {
			t.namedStop = stop
		}
		t.mu.Unlock()
		if first {
			t.log.Info("named budget's hard cap reached during a call: cancelling it", "budget", name, "metric", m)
			cancel(stop)
		}
		return
	}
}

// takeNamedStop returns (and forgets) the named budget's cap a call in
// flight reached, if one did.
func (t *taskRun) takeNamedStop() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.namedStop
	t.namedStop = nil
	return err
}
