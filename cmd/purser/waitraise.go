package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/redact"
)

// raisePoll is how often an attached run looks for a raise. A raise is a
// person's act, so a second or so of delay is not felt, and a poll reaches
// a raise made by any process on any store.
const raisePoll = 500 * time.Millisecond

// raiseWatch is what an attached run needs of its store to see a raise:
// of the task's own cap, and (where the store keeps them) of the named
// budget that stopped it.
type raiseWatch interface {
	BudgetChanges(ctx context.Context, taskID string) ([]purser.BudgetChange, error)
}

// namedWatch is what it needs to see a named budget raised.
type namedWatch interface {
	NamedBudget(ctx context.Context, name string) (purser.NamedBudget, error)
}

// stopped is a BLOCKED task an attached run waits on: how many budget
// changes it had when it stopped and, when a named budget stopped it, that
// budget's name and caps then.
type stopped struct {
	changes int
	named   string
	caps    budget.Amount
}

// stoppedBy reads what a task's stop is to be compared against.
func stoppedBy(ctx context.Context, store raiseWatch, o engine.TaskOutcome) (stopped, error) {
	changes, err := store.BudgetChanges(ctx, o.Task.ID)
	if err != nil {
		return stopped{}, err
	}
	st := stopped{changes: len(changes)}
	nw, ok := store.(namedWatch)
	if name := namedStop(o.Err); ok && name != "" {
		if nb, err := nw.NamedBudget(ctx, name); err == nil {
			st.named, st.caps = name, nb.Caps()
		}
	}
	return st, nil
}

// namedStop is the named budget that stopped a task ("" for another stop).
func namedStop(err error) string {
	var ibe *budget.InsufficientBudgetError
	if errors.As(err, &ibe) && ibe.Scope == budget.ScopeNamed {
		return ibe.Name
	}
	var be *budget.BudgetExhaustedError
	if errors.As(err, &be) && be.Scope == budget.ScopeNamed {
		return be.Name
	}
	return ""
}

// waitForRaises keeps a run attached after it ended with budget stops
// (--wait-for-raise): each task BLOCKED by its budget whose cap a person
// then raises from outside its box (purser raise, recorded among its budget
// changes) is resumed here, in this process, as purser resume would. It
// returns the outcomes with each resumed task's new one, once no budget
// stop is left to wait for, wait has passed, or ctx ends (Ctrl+C): HARD
// still stopped and BLOCKED each task first, as the spec says; waiting
// comes after, never instead.
func waitForRaises(s *session, store raiseWatch, notes io.Writer, wait time.Duration, outcomes []engine.TaskOutcome) []engine.TaskOutcome {
	ctx := s.ctx
	seen := map[int]stopped{} // by outcome index
	for i, o := range outcomes {
		if o.Err == nil || !engine.IsBudgetStop(o.Err) {
			continue
		}
		st, err := stoppedBy(ctx, store, o)
		if err != nil {
			fmt.Fprintf(notes, "purser: --wait-for-raise: reading task %s's budget changes: %s; not waiting for it\n", o.Task.ID, redact.Display(err.Error()))
			continue
		}
		seen[i] = st
		how := fmt.Sprintf("purser raise %s --usd N or --tokens N", o.Task.ID)
		if st.named != "" {
			how = fmt.Sprintf("purser budgets raise %s --file FILE", st.named)
		}
		fmt.Fprintf(notes, "task %s is BLOCKED: waiting up to %s for a raise (%s, from outside its workspace); Ctrl+C stops waiting\n",
			o.Task.ID, wait, how)
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(raisePoll)
	defer tick.Stop()
	for len(seen) > 0 {
		select {
		case <-ctx.Done():
			fmt.Fprintln(notes, "purser: stopped waiting for a raise; the BLOCKED tasks stay BLOCKED (purser raise, then purser resume)")
			return outcomes
		case <-deadline.C:
			fmt.Fprintf(notes, "purser: no raise came in %s; the BLOCKED tasks stay BLOCKED (purser raise, then purser resume)\n", wait)
			return outcomes
		case <-tick.C:
		}
		for i, st := range seen {
			if !raisedSince(ctx, store, outcomes[i].Task.ID, st) {
				continue
			}
			delete(seen, i)
			outcomes[i] = resumeRaised(ctx, s, notes, outcomes[i].Task)
			if engine.IsBudgetStop(outcomes[i].Err) {
				// Raised, but not enough: wait for the next raise.
				if st, err := stoppedBy(ctx, store, outcomes[i]); err == nil {
					seen[i] = st
				}
			}
		}
	}
	return outcomes
}

// raisedSince reports whether, since the task stopped, purser raise moved
// its cap or the named budget that stopped it has other caps. A store that
// cannot be read now is read again at the next look.
func raisedSince(ctx context.Context, store raiseWatch, taskID string, st stopped) bool {
	if st.named != "" {
		nb, err := store.(namedWatch).NamedBudget(ctx, st.named)
		if err == nil && nb.Caps() != st.caps {
			return true
		}
	}
	changes, err := store.BudgetChanges(ctx, taskID)
	if err != nil {
		return false
	}
	for _, c := range changes[min(st.changes, len(changes)):] {
		if strings.HasPrefix(c.Source, purser.TaskRaiseSource) {
			return true
		}
	}
	return false
}

// resumeRaised resumes a raised task in the attached run, its live view
// shown again, and says so.
func resumeRaised(ctx context.Context, s *session, notes io.Writer, task purser.Task) engine.TaskOutcome {
	fmt.Fprintf(notes, "task %s was raised: resuming it here\n", task.ID)
	stopView := s.show([]purser.Task{task})
	o, err := s.engine.Resume(ctx, task, nil)
	stopView()
	if err != nil {
		return engine.TaskOutcome{Task: task, Err: err}
	}
	if o.Task.ID == "" {
		o.Task = task
	}
	return o
}
