package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/redact"
)

// raisePoll is how often an attached run looks for a raise. A raise is a
// person's act, so a second or so of delay is not felt, and a poll reaches
// a raise made by any process on any store.
const raisePoll = 500 * time.Millisecond

// raiseWatch is what an attached run needs of its store to see a raise.
type raiseWatch interface {
	BudgetChanges(ctx context.Context, taskID string) ([]purser.BudgetChange, error)
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
	seen := map[int]int{} // outcome index → budget changes recorded when it stopped
	for i, o := range outcomes {
		if o.Err == nil || !engine.IsBudgetStop(o.Err) {
			continue
		}
		changes, err := store.BudgetChanges(ctx, o.Task.ID)
		if err != nil {
			fmt.Fprintf(notes, "purser: --wait-for-raise: reading task %s's budget changes: %s; not waiting for it\n", o.Task.ID, redact.Display(err.Error()))
			continue
		}
		seen[i] = len(changes)
		fmt.Fprintf(notes, "task %s is BLOCKED: waiting up to %s for a raise (purser raise %s --usd N or --tokens N, from outside its workspace); Ctrl+C stops waiting\n",
			o.Task.ID, wait, o.Task.ID)
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
		for i, n := range seen {
			raised, err := raisedSince(ctx, store, outcomes[i].Task.ID, n)
			if err != nil || !raised {
				continue
			}
			delete(seen, i)
			outcomes[i] = resumeRaised(ctx, s, notes, outcomes[i].Task)
			if engine.IsBudgetStop(outcomes[i].Err) {
				// Raised, but not enough: wait for the next raise.
				changes, err := store.BudgetChanges(ctx, outcomes[i].Task.ID)
				if err == nil {
					seen[i] = len(changes)
				}
			}
		}
	}
	return outcomes
}

// raisedSince reports whether a raise by purser raise was recorded for the
// task after its first n budget changes.
func raisedSince(ctx context.Context, store raiseWatch, taskID string, n int) (bool, error) {
	changes, err := store.BudgetChanges(ctx, taskID)
	if err != nil {
		return false, err
	}
	for _, c := range changes[min(n, len(changes)):] {
		if strings.HasPrefix(c.Source, purser.TaskRaiseSource) {
			return true, nil
		}
	}
	return false, nil
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
