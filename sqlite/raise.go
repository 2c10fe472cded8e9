package sqlite

import (
	"context"
	"fmt"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/internal/storesql"
)

var _ purser.TaskRaiser = (*Store)(nil)

// RaiseTask moves a task's recorded budget, records the change and queues
// its BLOCKED job again, in one IMMEDIATE transaction.
func (s *Store) RaiseTask(ctx context.Context, c purser.BudgetChange) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil) // _txlock=immediate: the write lock is taken now
	if err != nil {
		return false, fmt.Errorf("raise task %s: %w", c.TaskID, err)
	}
	defer tx.Rollback()
	requeued, err := storesql.RaiseTask(ctx, sqlDB{tx}, c, "")
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return false, fmt.Errorf("raise task %s: %w", c.TaskID, err)
	}
	return requeued, nil
}
