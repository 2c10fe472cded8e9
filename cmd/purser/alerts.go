package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/alert"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
)

// alerts is a run's webhook notifier, when purser.yaml configures one.
type alerts struct {
	n *alert.Notifier

	mu     sync.Mutex
	failed []string // what could not be delivered, told when the run ends
	once   sync.Once
}

// startAlerts starts the notifier purser.yaml's alerts: section asks for,
// or returns nil when it asks for none. Every alert goes through the
// store's outbox, and what an earlier process left undelivered (it was
// killed, or its receiver was down) is queued first, said on stderr. Tasks
// the store already knows start from the tier they reached, so a resumed
// task's lines are not announced twice.
func startAlerts(ctx context.Context, stderr io.Writer, proj *config.Project, store store, tasks []purser.Task) (*alerts, error) {
	if proj == nil || !proj.Alerts.Enabled() {
		return nil, nil
	}
	cfg, err := proj.Alerts.Config()
	if err != nil {
		return nil, badInput(err)
	}
	a := &alerts{}
	a.n = alert.New(cfg, alert.Options{Logf: func(format string, args ...any) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.failed = append(a.failed, fmt.Sprintf(format, args...))
	}, Outbox: store, Owner: proc.Owners{}.Self(), OwnerGone: proc.Owners{}.Gone})
	rec, err := a.n.Recover(ctx)
	if err != nil {
		a.n.Close()
		return nil, err
	}
	if rec.Expired > 0 {
		fmt.Fprintf(stderr, "purser: %d alert(s) an earlier run did not deliver expired unsent (older than %s, or tried %d times)\n",
			rec.Expired, rec.MaxAge, rec.MaxTotalAttempts)
	}
	if rec.Queued > 0 {
		fmt.Fprintf(stderr, "purser: delivering %d alert(s) an earlier run did not deliver\n", rec.Queued)
	}
	for _, t := range tasks {
		st, state, err := recordedStatus(ctx, store, t.ID)
		if errors.Is(err, purser.ErrNotFound) {
			continue
		}
		if err != nil {
			a.n.Close()
			return nil, err
		}
		a.n.Baseline(t.ID, st, state)
	}
	return a, nil
}

// recordedStatus is a recorded task's budget status and state, as the
// store has them.
func recordedStatus(ctx context.Context, store purser.Store, id string) (budget.Status, purser.TaskState, error) {
	rec, err := store.Task(ctx, id)
	if err != nil {
		return budget.Status{}, "", err
	}
	totals, err := store.UsageTotals(ctx, rec.ID)
	if err != nil {
		return budget.Status{}, "", err
	}
	totals.Time = rec.Elapsed
	m, err := budget.NewManager(rec.Budget, budget.Options{Initial: totals})
	if err != nil {
		return budget.Status{}, "", fmt.Errorf("task %s: %w", rec.ID, err)
	}
	return m.Status(), rec.State, nil
}

// observe is the notifier's engine observer (a no-op without alerts).
func (a *alerts) observe(ev purser.Event) {
	if a != nil {
		a.n.Observe(ev)
	}
}

// close delivers what is queued, waiting at most alerts.flush, and tells
// stderr what could not be delivered. Safe to call more than once.
func (a *alerts) close(stderr io.Writer) {
	if a == nil {
		return
	}
	a.once.Do(func() {
		res := a.n.Close()
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, f := range a.failed {
			fmt.Fprintln(stderr, "purser:", f)
		}
		if res.Undelivered > len(a.failed) {
			fmt.Fprintf(stderr, "purser: %d alert(s) not delivered before the end of the run (alerts.flush in purser.yaml)\n", res.Undelivered-len(a.failed))
		}
		if res.Undelivered > 0 {
			fmt.Fprintln(stderr, "purser: alerts not delivered, unless a receiver refused them for good, stay in the database and are delivered by the next purser run or resume")
		}
	})
}
