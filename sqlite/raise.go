package sqlite

import (
	"context"
	"fmt"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/internal/storerow"
)

var _ purser.TaskRaiser = (*Store)(nil)

// RaiseTask moves a task's recorded budget, records the change and queues
// its BLOCKED job again, in one IMMEDIATE transaction.
func (s *Store) RaiseTask(ctx context.Context, c purser.BudgetChange) (bool, error) {
	from, to, err := storerow.BudgetChangeJSON(c.From, c.To)
	if err != nil {
		return false, err
	}
	tx, err := s.db.BeginTx(ctx, nil) // _txlock=immediate: the write lock is taken now
	if err != nil {
		return false, fmt.Errorf("raise task %s: %w", c.TaskID, err)
	}
	defer tx.Rollback()
	var was string
	if err := tx.QueryRowContext(ctx, `SELECT budget_json FROM tasks WHERE id = ?`, c.TaskID).Scan(&was); err != nil {
		return false, fmt.Errorf("raise task %s: %w", c.TaskID, storerow.NotFound(err))
	}
	if err := storerow.CheckRaise(c, was, from); err != nil {
		return false, fmt.Errorf("raise task %s: %w", c.TaskID, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tasks SET budget_json = ?, updated_at = ? WHERE id = ?`, to, nanos(c.At), c.TaskID); err != nil {
		return false, fmt.Errorf("raise task %s: %w", c.TaskID, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO budget_changes (task_id, at, by_whom, source, from_json, to_json) VALUES (?, ?, ?, ?, ?, ?)`,
		c.TaskID, nanos(c.At), c.By, c.Source, from, to); err != nil {
		return false, fmt.Errorf("raise task %s: %w", c.TaskID, err)
	}
	res, err := tx.ExecContext(ctx, `UPDATE jobs SET state = 'queued', outcome = '', worker = '', lease_until = 0, not_before = 0, finished_at = 0
		WHERE task_id = ? AND state = 'finished' AND outcome = ?`, c.TaskID, string(purser.StateBlocked))
	if err != nil {
		return false, fmt.Errorf("raise task %s: queue it again: %w", c.TaskID, err)
	}
	n, _ := res.RowsAffected()
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("raise task %s: %w", c.TaskID, err)
	}
	return n > 0, nil
}
