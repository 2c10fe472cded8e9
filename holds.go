package purser

import (
	"context"

	"github.com/purser-dev/purser/budget"
)

// Holder is who placed a hold on a shared run or a named budget: the owner
// ID of the process (Owners.Self) and the task whose call it admits. A hold
// whose holder is known lets a resume drop what a dead process left,
// instead of waiting out the hold's TTL. It is an argument of every method
// that places a hold (SharedRunBudget.ReserveRun, NamedBudgets.ReserveNamed);
// the zero Holder's holds only lapse by their TTL.
type Holder struct {
	Owner  string
	TaskID string
}

// DroppedHolds is what the holds dropped on one run or named budget held.
type DroppedHolds struct {
	// Owner is whose holds they were: set by HoldReaper.DropLapsedHolds,
	// which drops several owners' at once.
	Owner string
	Scope budget.Scope // budget.ScopeRun or budget.ScopeNamed
	Name  string       // the run's ID or the named budget's name
	Holds int
	Held  budget.Amount
}

// HoldDropper drops the holds a dead process left on shared runs and named
// budgets, so that nobody waits for their TTL to lapse.
type HoldDropper interface {
	// DropHolds deletes the holds owner placed for task taskID — for every
	// task of owner's when taskID is "" — on runs and named budgets, and
	// returns what the unexpired ones held, per run and budget (none: an
	// empty slice). An empty owner drops nothing: holds placed without a
	// Holder only lapse. The caller must have established that owner is
	// gone (as far as the task is concerned): a live owner's hold dropped
	// lets the cap be overrun by its call.
	DropHolds(ctx context.Context, owner, taskID string) ([]DroppedHolds, error)
}

// ProcessOwners is implemented by Owners that can tell an owner whose
// process is known to have died — every hold it placed is orphaned — from
// one only given up on for a task: a worker whose lease on the task ran
// out may still run other tasks, on another host, so only the task's holds
// are its to lose.
type ProcessOwners interface {
	// ProcessGone reports whether the owner's process is known to be gone.
	ProcessGone(owner string) bool
}

// HoldReaper finds the holds of holders that are gone, so that a call
// waiting for room does not wait out their TTL (the call's timeout and a
// minute) while a dead worker's holds fill its run or named budget.
type HoldReaper interface {
	// Holders lists who placed the unexpired holds with a holder, on runs
	// and named budgets: each owner and task once, by owner then task.
	Holders(ctx context.Context) ([]Holder, error)
	// DropLapsedHolds deletes the holds placed for a task whose job on the
	// queue is leased to the hold's owner and whose lease ran out, by the
	// store's clock: that worker is gone as far as the task is concerned,
	// on whatever host. It returns what the unexpired ones held, per owner
	// and run or budget (none: an empty slice).
	DropLapsedHolds(ctx context.Context) ([]DroppedHolds, error)
}
