package report

import (
	"context"
	"fmt"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// TaskUsage is what RecordedStatus reads of a store: a task's record and
// the totals of its ledger.
type TaskUsage interface {
	Task(ctx context.Context, id string) (purser.TaskRecord, error)
	UsageTotals(ctx context.Context, taskID string) (budget.Totals, error)
}

// RecordedStatus is a recorded task's budget status and state, as the store
// has them: its budget replayed over its ledger's totals and its elapsed
// time. It is the one place a stored task's status is rebuilt.
func RecordedStatus(ctx context.Context, s TaskUsage, id string) (budget.Status, purser.TaskState, error) {
	rec, err := s.Task(ctx, id)
	if err != nil {
		return budget.Status{}, "", err
	}
	st, err := RecordStatus(ctx, s, rec)
	return st, rec.State, err
}

// RecordStatus is the budget status of a task record already read.
func RecordStatus(ctx context.Context, s TaskUsage, rec purser.TaskRecord) (budget.Status, error) {
	totals, err := s.UsageTotals(ctx, rec.ID)
	if err != nil {
		return budget.Status{}, err
	}
	st, err := TotalsStatus(rec.Budget, totals, rec.Elapsed)
	if err != nil {
		return budget.Status{}, fmt.Errorf("task %s: %w", rec.ID, err)
	}
	return st, nil
}

// TotalsStatus is the budget status of cfg over ledger totals already read
// (the store's running totals, never its ledger) and elapsed wall time: a
// task's, or a run's.
func TotalsStatus(cfg budget.Config, totals budget.Totals, elapsed time.Duration) (budget.Status, error) {
	totals.Time = elapsed
	m, err := budget.NewManager(cfg, budget.Options{Initial: totals})
	if err != nil {
		return budget.Status{}, err
	}
	return m.Status(), nil
}
