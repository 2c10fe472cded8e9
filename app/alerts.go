package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/alert"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/config"
)

// Alerts is a run's webhook notifier, when purser.yaml configures one. A nil
// *Alerts is a valid notifier that sends nothing.
type Alerts struct {
	n *alert.Notifier

	mu     sync.Mutex
	failed []string // what could not be delivered, told when the run ends
	once   sync.Once
}

// StartAlerts starts the notifier purser.yaml's alerts: section asks for,
// or returns nil when it asks for none. Every alert goes through the
// store's outbox, and what an earlier process left undelivered (it was
// killed, or its receiver was down) is queued first, said on stderr. Tasks
// the store already knows start from the tier they reached, so a resumed
// task's lines are not announced twice.
func StartAlerts(ctx context.Context, stderr io.Writer, proj *config.Project, store Store, tasks []purser.Task) (*Alerts, error) {
	if proj == nil || !proj.Alerts.Enabled() {
		return nil, nil
	}
	cfg, err := proj.Alerts.Config()
	if err != nil {
		return nil, BadInput(err)
	}
	a := &Alerts{}
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
		st, state, err := alertBaseline(ctx, store, t.ID)
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

// Observe is the notifier's engine observer (a no-op without alerts). The
// notifier only queues: delivery never holds up the engine.
func (a *Alerts) Observe(ev purser.Event) {
	if a != nil {
		a.n.Observe(ev)
	}
}

// Close delivers what is queued, waiting at most alerts.flush, and tells
// stderr what could not be delivered. Safe to call more than once.
func (a *Alerts) Close(stderr io.Writer) {
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
