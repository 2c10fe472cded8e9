package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/internal/storesql"
)

var _ purser.TaskRaiser = (*Store)(nil)

// RaiseTask moves a task's recorded budget, records the change and queues
// its BLOCKED job again, in one transaction; the task's row is locked, so
// two raises made at once are decided one after the other.
func (s *Store) RaiseTask(ctx context.Context, c purser.BudgetChange) (bool, error) {
	var requeued bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		requeued, err = storesql.RaiseTask(ctx, pgDB{tx}, c, " FOR UPDATE")
		return err
	})
	if err != nil {
		return false, fmt.Errorf("raise task %s: %w", c.TaskID, err)
	}
	return requeued, nil
}
