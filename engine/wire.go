package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// Per-request admission at Purser's door.
//
// A call is admitted at its start for a worst case the engine guesses (its
// prompt and Config.ReserveOutputTokens), held on the task, its run, the run
// shared through the database and the named budgets the run draws from. An
// agent then sends any number of model requests through the door during
// the call, each admitted here for its own worst case: its input as the
// door counted it plus its output bound, priced by the engine's table.
//
// The call's own hold is lent to its requests, not stacked under them: a
// request alone in flight borrows what the call's reservation still holds
// (its worst case less what the call has spent, budget.Reservation.Held),
// and only what exceeds that is held anew, on every budget the call was
// held on. So a one-request call holds no more than its own worst case (no
// double reservation refusing a call that fits). Usage is reported for the
// call, not for a request, so only a request alone may borrow: every token
// spent while it is in flight is then its own and shrinks the call's hold
// by as much, its worst case staying covered. A request joining one that
// borrowed first has the borrower's unspent loan held as the borrower's own
// (repay) — or waits for it when that does not fit — and holds its whole
// worst case anew: requests in flight together are always covered by holds
// (no overshoot by what was never reserved), counting spend in flight
// twice at worst — only ever refusing early, never admitting past a cap.
// A hold in the database does not shrink as the call spends (the store
// counts spend beside it): the first request that needs more than the
// call's hold has left gives the call's database holds back and holds its
// whole worst case there, as every request after it does.
//
// A request that does not fit is first shrunk (its output clamped by
// budget.ClampOutput to what the tightest budget leaves); one that does not
// fit even at budget.MinOutputTokens is refused with a wireRefusal naming
// the cap, the call is cancelled and the task stops BLOCKED, as a call
// refused at its start does.

// wireAdmitter admits the requests of one call (purser.WireAdmitter).
type wireAdmitter struct {
	t      *taskRun
	pc     *preparedCall
	res    *budget.Reservation // the call's own hold: lent to its requests
	ctx    context.Context     // the call's: ends when the call is cut
	cancel context.CancelCauseFunc

	// dbHeld: the call still holds its worst case on the run shared
	// through the database and on named budgets (see hold).
	dbHeld bool

	mu     sync.Mutex
	active int // requests admitted or being admitted, not yet released
	// borrower is the one request that borrows from the call's hold, if
	// any, and poolAtLend what the hold had left when it borrowed.
	borrower   *wireHold
	poolAtLend budget.Amount
	open       map[int]*wireHold
	next       int
	switched   string           // the cheap model the call's requests moved to, once
	cache      map[string]int64 // cache-read tokens of the model's last reply
	output     map[string]int64 // output tokens of the model's last reply
	noted      map[string]bool  // the degrade decisions recorded for the call
	closed     bool             // the call has ended: nothing more is admitted
	// rent is, per model, what staying on it has cost more than its cheap
	// tier would have since a switch was first declined (wiredegrade.go).
	rent map[string]budget.USD

	noteMu sync.Mutex // degrade records are made one at a time
}

// wireHold is what one admitted request holds: a loan from the call's
// reservation and holds of its own beyond it.
type wireHold struct {
	loan budget.Amount
	once sync.Once

	mu       sync.Mutex
	releases []func() // the holds of its own
	done     bool
}

// add gives the request another hold of its own; false (the hold not
// taken) when the request has ended.
func (h *wireHold) add(release func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return false
	}
	h.releases = append(h.releases, release)
	return true
}

// releaseAll gives back every hold of its own.
func (h *wireHold) releaseAll() {
	h.mu.Lock()
	rs := h.releases
	h.releases, h.done = nil, true
	h.mu.Unlock()
	for i := len(rs) - 1; i >= 0; i-- {
		rs[i]()
	}
}

func newWireAdmitter(t *taskRun, pc *preparedCall, res *budget.Reservation, ctx context.Context, cancel context.CancelCauseFunc) *wireAdmitter {
	return &wireAdmitter{t: t, pc: pc, res: res, dbHeld: pc.releaseDB != nil, ctx: ctx, cancel: cancel, open: map[int]*wireHold{},
		cache: map[string]int64{}, output: map[string]int64{}}
}

// AdmitWire admits one request: the HARD check, the degrade policy at the
// wire, then a hold for the request's worst case, its output clamped to
// what fits.
func (w *wireAdmitter) AdmitWire(ctx context.Context, r purser.WireRequest) (purser.WireGrant, error) {
	if r.InputTokens < 0 || r.MaxOutputTokens < 0 {
		return purser.WireGrant{}, fmt.Errorf("purser: request with negative token counts (input %d, max output %d)", r.InputTokens, r.MaxOutputTokens)
	}
	if err := w.stopped(); err != nil {
		return purser.WireGrant{}, err
	}
	w.mu.Lock()
	w.active++
	w.mu.Unlock()
	admitted := false
	defer func() {
		if !admitted {
			w.mu.Lock()
			w.active--
			w.mu.Unlock()
		}
	}()
	// A request waiting for room stops waiting when its call ends.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(w.ctx, stop)()
	grant, maxOut, sub, err := w.shape(ctx, r)
	if err != nil {
		return purser.WireGrant{}, err
	}
	h, size, err := w.hold(ctx, grant.Model, r.InputTokens, maxOut)
	if err != nil {
		sub.release()
		return purser.WireGrant{}, w.refuse(ctx, grant.Model, err)
	}
	if size.maxOut < maxOut {
		grant.MaxOutputTokens = size.maxOut
		grant.Actions = append(grant.Actions, fmt.Sprintf("max output %d → %d: what the budget has left under its hard cap", maxOut, size.maxOut))
	}
	if err := w.register(&grant, h, sub); err != nil {
		return purser.WireGrant{}, err
	}
	admitted = true
	if why, due := w.wrapUpDue(size.want); due {
		w.askWrapUp(&grant, why, size.maxOut)
	}
	if w.t.task.Degrade.BudgetHint {
		grant.Hint = w.t.budget.Hint()
	}
	return grant, nil
}

// shape decides what a request is forwarded as before anything is held:
// its output bound (the engine's when it names none), the degrade policy's
// model and bound, and a sub-agent's own cap (refused as it is, the call
// goes on). It returns the grant so far and the bound to hold for.
func (w *wireAdmitter) shape(ctx context.Context, r purser.WireRequest) (purser.WireGrant, int64, subAgentGrant, error) {
	grant := purser.WireGrant{Model: r.Model}
	maxOut := r.MaxOutputTokens
	if maxOut == 0 {
		// A request that names no bound is bounded by the engine's, so that
		// its worst case can be held at all.
		maxOut = w.t.e.cfg.ReserveOutputTokens
		grant.MaxOutputTokens = maxOut
	}
	grant.Model, maxOut, grant.Actions = w.degrade(ctx, r, maxOut)
	if maxOut != r.MaxOutputTokens {
		grant.MaxOutputTokens = maxOut
	}
	sub, err := w.subAgent(r, grant.Model, maxOut) // subagent.go
	if err != nil {
		return purser.WireGrant{}, 0, subAgentGrant{}, err
	}
	if sub.maxOut < maxOut {
		maxOut, grant.MaxOutputTokens, grant.Actions = sub.maxOut, sub.maxOut, append(grant.Actions, sub.action)
	}
	grant.Used = sub.used
	return grant, maxOut, sub, nil
}

// register counts an admitted request's hold among the call's open ones
// and gives the grant its Release; a call that ended while the request was
// admitted holds nothing past it, and the request is refused.
func (w *wireAdmitter) register(grant *purser.WireGrant, h *wireHold, sub subAgentGrant) error {
	w.mu.Lock()
	if w.closed {
		w.forget(h)
		w.mu.Unlock()
		h.releaseAll()
		sub.release()
		if err := w.stopped(); err != nil {
			return err
		}
		return errors.New("purser: the call has ended")
	}
	id := w.next
	w.next++
	w.open[id] = h
	w.mu.Unlock()
	grant.Release = func() {
		h.once.Do(func() {
			w.mu.Lock()
			if _, open := w.open[id]; open {
				delete(w.open, id)
				w.active--
			}
			w.forget(h)
			w.mu.Unlock()
			h.releaseAll()
			sub.release()
		})
	}
	return nil
}

// stopped refuses every request once the call is cut or a cap it is
// admitted under is reached, naming the cap.
func (w *wireAdmitter) stopped() error {
	if err := w.t.budget.Check(); err != nil {
		return w.refuse(w.ctx, w.pc.model, err)
	}
	if err := w.ctx.Err(); err != nil {
		cause := context.Cause(w.ctx)
		if IsBudgetStop(cause) {
			return &wireRefusal{cap: w.capOf(w.ctx, cause), cause: cause}
		}
		return fmt.Errorf("purser: the call has ended: %w", cause)
	}
	return nil
}

// hold holds the request's worst case: borrowed from the call's
// reservation as far as it goes, held anew beyond it, shrunk to fit.
func (w *wireAdmitter) hold(ctx context.Context, model string, input, maxOut int64) (*wireHold, callSize, error) {
	t := w.t
	worst := func(out int64) budget.Amount { a, _ := t.worstCase(model, input, out); return a }
	size := callSize{want: worst(maxOut), maxOut: maxOut}
	waiter := holdWaiter{t: t}
	for {
		if err := w.repay(ctx); err != nil {
			return nil, size, err
		}
		h, credit, dbCredit, extra, extraDB := w.plan(size.want)
		if extra == (budget.Amount{}) && extraDB == (budget.Amount{}) {
			return h, size, nil
		}
		release, inDB, err := w.holdExtra(ctx, extraDB, extra)
		if err == nil {
			h.add(release)
			return h, size, nil
		}
		w.mu.Lock()
		w.forget(h)
		w.mu.Unlock()
		if inDB {
			credit = dbCredit
		}
		var short *budget.InsufficientBudgetError
		if !errors.As(err, &short) {
			return nil, size, err
		}
		// Shrink the request to what the short budget leaves, its loan
		// there included.
		clamped, cerr := w.clamp(model, input, maxOut, plusSat(short.Available, credit))
		if cerr == nil && clamped.maxOut < size.maxOut {
			size = clamped
			continue
		}
		// Even the least worthwhile request does not fit. When only other
		// calls' holds stand in the way (the spend leaves room), wait for
		// them as a call does, else refuse.
		if !w.heldByOthers(ctx, model, input, credit, short) {
			// Say what the request needs and the room it had with its loan
			// from the call's own hold, not net of that loan ("needs $0.56,
			// $0.0005 left" of a $0.006 cap nothing was spent from).
			short.Want, short.Available = plusSat(short.Want, credit), plusSat(short.Available, credit)
			return nil, size, err
		}
		if err := waiter.wait(ctx, fmt.Sprintf("waiting: other calls hold what the budget has left for a request of %s", w.pc.kind)); err != nil {
			return nil, size, err
		}
		size = callSize{want: worst(maxOut), maxOut: maxOut}
	}
}

// plan decides, for a request whose worst case is want, what it borrows
// from the call's own hold (credit; dbCredit of it in the database) and
// what it must hold anew (extra in memory, extraDB in the database).
func (w *wireAdmitter) plan(want budget.Amount) (h *wireHold, credit, dbCredit, extra, extraDB budget.Amount) {
	w.mu.Lock()
	// Only a request alone in flight borrows: every token spent while it
	// is then its own, and shrinks the call's hold by as much.
	var loan budget.Amount
	if w.active == 1 && w.borrower == nil {
		loan = want.Min(w.res.Held())
	}
	credit = loan
	extra = minusFloor(want, loan)
	// A hold in the database does not shrink as the call spends: the
	// store counts the spend beside it. Once a request needs more than
	// the call's hold has left, that hold would count the call's spend
	// twice there (refusing room the call never uses), so it is given
	// back — when no request borrows from it — and each request holds
	// its whole worst case there from then on.
	drop := extra != (budget.Amount{}) && w.dbHeld && w.borrower == nil
	if drop {
		w.dbHeld = false
	}
	extraDB, dbCredit = extra, credit
	if !w.dbHeld {
		extraDB, dbCredit = want, budget.Amount{}
	}
	h = &wireHold{loan: loan}
	if loan != (budget.Amount{}) {
		w.borrower, w.poolAtLend = h, w.res.Held()
	}
	w.mu.Unlock()
	if drop {
		w.pc.releaseDB()
	}
	return h, credit, dbCredit, extra, extraDB
}

// forget ends h's loan, if it is the borrower (w.mu held).
func (w *wireAdmitter) forget(h *wireHold) {
	if w.borrower == h {
		w.borrower = nil
	}
}

// repay covers the loan of a request that borrowed from the call's hold
// alone, before another request joins it in flight: the other's spend
// would shrink the call's hold too, leaving the borrower's worst case
// uncovered. What the borrower has not yet spent of its loan is held as
// its own (in the database too, while the call's hold is there). When
// that does not fit, the new request waits for the borrower to end.
func (w *wireAdmitter) repay(ctx context.Context) error {
	waiter := holdWaiter{t: w.t}
	for {
		w.mu.Lock()
		b := w.borrower
		if b == nil {
			w.mu.Unlock()
			return nil
		}
		spent := minusFloor(w.poolAtLend, w.res.Held())
		owed := minusFloor(b.loan, spent)
		dbToo := w.dbHeld
		if owed == (budget.Amount{}) {
			w.borrower = nil
			w.mu.Unlock()
			return nil
		}
		w.mu.Unlock()
		var owedDB budget.Amount
		if dbToo {
			owedDB = owed
		}
		release, _, err := w.holdExtra(ctx, owedDB, owed)
		if err == nil {
			w.mu.Lock()
			mine := w.borrower == b
			if mine {
				w.borrower = nil
			}
			w.mu.Unlock()
			if !mine || !b.add(release) {
				release() // the borrower ended meanwhile
			}
			continue
		}
		if !errors.Is(err, budget.ErrInsufficientBudget) {
			return err
		}
		if err := waiter.wait(ctx, fmt.Sprintf("waiting: a request of %s in flight holds what the budget has left", w.pc.kind)); err != nil {
			return err
		}
	}
}

// clamp shrinks a request's output until its worst case fits in avail.
func (w *wireAdmitter) clamp(model string, input, maxOut int64, avail budget.Amount) (callSize, error) {
	want, out, err := budget.ClampOutput(avail, input, maxOut, func(output int64) budget.Amount {
		a, _ := w.t.worstCase(model, input, min(output, maxOut))
		return a
	})
	return callSize{want: want, maxOut: min(out, maxOut)}, err
}

// heldByOthers: the least worthwhile request would fit in what the short
// budget has left by spend — for a named budget, its spend in every
// process; for the task and its run, their spend and this process's holds
// — the loan included: only other calls' holds refused it.
func (w *wireAdmitter) heldByOthers(ctx context.Context, model string, input int64, credit budget.Amount, short *budget.InsufficientBudgetError) bool {
	if short.Scope == budget.ScopeNamed {
		st, err := w.t.e.cfg.Named.NamedBudgetStatus(ctx, short.Name, w.t.e.cfg.Clock.Now())
		if err != nil {
			return false
		}
		_, err = w.clamp(model, input, w.t.e.cfg.ReserveOutputTokens, plusSat(budget.Headroom(st.Caps(), st.Spent.Amount(), budget.Amount{}), credit))
		return err == nil
	}
	avail := w.t.budget.Available()
	if p := w.t.budget.Parent(); p != nil {
		avail = avail.Min(p.Available())
	}
	_, err := w.clamp(model, input, w.t.e.cfg.ReserveOutputTokens, plusSat(avail, credit))
	return err == nil
}

// holdExtra holds extraDB on the run shared through the database and on
// the named budgets the call was admitted against, then extra on the task
// and its run here; a refusal anywhere releases what was taken and says
// what fits there, and whether it was in the database.
func (w *wireAdmitter) holdExtra(ctx context.Context, extraDB, extra budget.Amount) (func(), bool, error) {
	t := w.t
	var releases []func()
	releaseAll := func() {
		for i := len(releases) - 1; i >= 0; i-- {
			releases[i]()
		}
	}
	fail := func(inDB bool, err error) (func(), bool, error) { releaseAll(); return nil, inDB, err }
	if run := t.budget.Parent(); extraDB != (budget.Amount{}) && t.e.cfg.Shared != nil && run != nil && t.runID != "" {
		if caps := budget.CapsOf(run.Config()); caps != budget.Unlimited {
			release, err := t.e.cfg.Shared.ReserveRun(ctx, t.runID, t.holder(), caps, extraDB, t.holdTTL())
			if err != nil {
				var short *budget.InsufficientBudgetError
				if errors.As(err, &short) {
					short.Scope = budget.ScopeRun
				}
				return fail(true, err)
			}
			releases = append(releases, release)
		}
	}
	if extraDB != (budget.Amount{}) && t.e.cfg.Named != nil && len(t.draws) > 0 {
		release, err := t.holdNamed(ctx, t.draws, extraDB)
		if errors.Is(err, errHeldByOthers) {
			err = w.namedShort(ctx, extraDB)
		}
		if err != nil {
			return fail(true, err)
		}
		releases = append(releases, release)
	}
	if extra != (budget.Amount{}) {
		res, err := t.budget.Reserve(extra)
		if err != nil {
			return fail(false, err)
		}
		releases = append(releases, res.Release)
	}
	return releaseAll, false, nil
}

// namedShort says which named budget the call draws from has no room for
// extra, and what it has: the first whose headroom (its spend and every
// hold) is short of it. When none is short now (the room came back since
// the hold was refused), the refusal says so with the whole of extra
// available, so that the request waits and tries again rather than shrink.
func (w *wireAdmitter) namedShort(ctx context.Context, extra budget.Amount) error {
	now := w.t.e.cfg.Clock.Now()
	for _, name := range w.t.draws {
		st, err := w.t.e.cfg.Named.NamedBudgetStatus(ctx, name, now)
		if err != nil {
			return err
		}
		if err := budget.FitNamed(name, extra, st.Headroom()); err != nil {
			var short *budget.InsufficientBudgetError
			if errors.As(err, &short) {
				short.Named = st.Standing()
			}
			return err
		}
	}
	return &budget.InsufficientBudgetError{Scope: budget.ScopeNamed, Name: w.t.draws[0], Metric: budget.Tokens, Want: extra, Available: extra}
}

// refuse turns a refusal into the door's answer: a wireRefusal naming the
// cap, after which the call is cut and the task stops BLOCKED. Any other
// error is passed on.
func (w *wireAdmitter) refuse(ctx context.Context, model string, err error) error {
	if !IsBudgetStop(err) {
		return err
	}
	ref := &wireRefusal{cap: w.capOf(ctx, err), cause: err}
	w.t.mu.Lock()
	if w.t.wireStop == nil {
		w.t.wireStop = err
	}
	w.t.mu.Unlock()
	w.t.e.emit(w.t, purser.Event{Type: purser.EventWarning, Call: w.pc.kind, Message: ref.Error()})
	if w.t.finishesCall(ref.cap.Scope) {
		// onHard: finish-call: the replies in flight are let end; refusing
		// what the agent sends next is what ends the call.
		w.t.log.Info("a request at the door was refused; the call is let end (onHard: finish-call)", "call", w.pc.kind, "model", model, "cap", ref.cap.CapLabel())
		return ref
	}
	w.t.log.Info("a request at the door was refused: cutting the call", "call", w.pc.kind, "model", model, "cap", ref.cap.CapLabel())
	w.cancel(err)
	return ref
}

// capOf is the cap behind a refusal, as a *budget.BudgetExhaustedError.
func (w *wireAdmitter) capOf(ctx context.Context, err error) *budget.BudgetExhaustedError {
	var be *budget.BudgetExhaustedError
	if errors.As(err, &be) {
		return be
	}
	var short *budget.InsufficientBudgetError
	if !errors.As(err, &short) {
		return &budget.BudgetExhaustedError{Scope: budget.ScopeTask}
	}
	be = &budget.BudgetExhaustedError{Scope: short.Scope, Name: short.Name, Metric: short.Metric}
	var caps budget.Amount
	switch short.Scope {
	case budget.ScopeTask:
		caps = budget.CapsOf(w.t.budget.Config())
		be.Status = w.t.budget.Status()
	case budget.ScopeRun:
		if p := w.t.budget.Parent(); p != nil {
			caps = budget.CapsOf(p.Config())
			be.Status = p.Status()
		}
	case budget.ScopeNamed:
		if st, err := w.t.e.cfg.Named.NamedBudgetStatus(context.WithoutCancel(ctx), short.Name, w.t.e.cfg.Clock.Now()); err == nil {
			caps = st.Caps()
		}
	}
	if short.Metric == budget.Money {
		be.Limit = int64(caps.USD)
	} else {
		be.Limit = caps.Tokens
	}
	return be
}

// observe notes a reply's cache traffic and output by model, for judging
// the next request's degrade actions on their billed cost.
func (w *wireAdmitter) observe(ev budget.UsageEvent) {
	if ev.Model == "" || ev.InputTokens+ev.OutputTokens == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev.InputTokens > 0 {
		w.cache[ev.Model] = ev.CacheReadTokens + ev.CacheWriteTokens
	}
	if ev.OutputTokens > 0 {
		w.output[ev.Model] = ev.OutputTokens
	}
}

// close releases what requests the door never released still hold, when
// the call ends.
func (w *wireAdmitter) close() {
	w.mu.Lock()
	var open []*wireHold
	for _, h := range w.open {
		open = append(open, h)
	}
	w.open = map[int]*wireHold{}
	w.borrower = nil
	w.closed = true
	w.mu.Unlock()
	for _, h := range open {
		h.once.Do(h.releaseAll)
	}
}

// wireRefusal is the door's refusal of a request: its text is what the
// agent reads, in the provider's error shape ("purser: budget exhausted
// (hard usd $1.00)"); it wraps the cap and the refusal behind it.
type wireRefusal struct {
	cap   *budget.BudgetExhaustedError
	cause error
}

func (e *wireRefusal) Error() string {
	return fmt.Sprintf("purser: budget exhausted (%s)", e.cap.CapLabel())
}

func (e *wireRefusal) Unwrap() []error { return []error{e.cap, e.cause} }

// minusFloor is a − b per metric, never below 0; an unlimited a stays so.
func minusFloor(a, b budget.Amount) budget.Amount {
	out := a
	if a.USD != budget.UnlimitedUSD {
		out.USD = max(budget.USD(budget.SatSub(int64(a.USD), int64(b.USD))), 0)
	}
	if a.Tokens != budget.Unlimited.Tokens {
		out.Tokens = max(budget.SatSub(a.Tokens, b.Tokens), 0)
	}
	return out
}

// plusSat is a + b per metric, saturating.
func plusSat(a, b budget.Amount) budget.Amount {
	return budget.Amount{USD: a.USD.Plus(b.USD), Tokens: budget.SatAdd(a.Tokens, b.Tokens)}
}

// takeWireStop returns (and forgets) the cap that refused a request of the
// call in flight at Purser's door, if one did.
func (t *taskRun) takeWireStop() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.wireStop
	t.wireStop = nil
	return err
}
