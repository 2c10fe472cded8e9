package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/internal/storerow"
)

var _ purser.TaskRaiser = (*Store)(nil)

// RaiseTask moves a task's recorded budget, records the change and queues
// its BLOCKED job again, in one transaction; the task's row is locked, so
// two raises made at once are decided one after the other.
func (s *Store) RaiseTask(ctx context.Context, c purser.BudgetChange) (bool, error) {
	from, to, err := storerow.BudgetChangeJSON(c.From, c.To)
	if err != nil {
		return false, err
	}
	var requeued bool
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var was string
		if err := tx.QueryRow(ctx, `SELECT budget_json FROM tasks WHERE id = $1 FOR UPDATE`, c.TaskID).Scan(&was); err != nil {
			return storerow.NotFound(err)
		}
		if err := storerow.CheckRaise(c, was, from); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE tasks SET budget_json = $1, updated_at = $2 WHERE id = $3`, to, nanos(c.At), c.TaskID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO budget_changes (task_id, at, by_whom, source, from_json, to_json) VALUES ($1, $2, $3, $4, $5, $6)`,
			c.TaskID, nanos(c.At), c.By, c.Source, from, to); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE jobs SET state = 'queued', outcome = '', worker = '', lease_until = 0, not_before = 0, finished_at = 0
			WHERE task_id = $1 AND state = 'finished' AND outcome = $2`, c.TaskID, string(purser.StateBlocked))
		requeued = tag.RowsAffected() > 0
		return err
	})
	if err != nil {
		return false, fmt.Errorf("raise task %s: %w", c.TaskID, err)
	}
	return requeued, nil
}
