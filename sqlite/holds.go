package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

var _ purser.HoldDropper = (*Store)(nil)

// DropHolds deletes the holds owner placed for taskID (every task of
// owner's when taskID is ""), on runs and named budgets, in one IMMEDIATE
// transaction, and returns what the unexpired ones held.
func (s *Store) DropHolds(ctx context.Context, owner, taskID string) ([]purser.DroppedHolds, error) {
	out := []purser.DroppedHolds{}
	if owner == "" {
		return out, nil
	}
	tx, err := s.db.BeginTx(ctx, nil) // _txlock=immediate: the write lock is taken now
	if err != nil {
		return nil, fmt.Errorf("drop the holds of %s: %w", owner, err)
	}
	defer tx.Rollback()
	now := time.Now().UnixNano()
	for _, t := range []struct {
		table, key string
		scope      budget.Scope
	}{{"run_reservations", "run_id", budget.ScopeRun}, {"named_reservations", "name", budget.ScopeNamed}} {
		rows, err := tx.QueryContext(ctx, `SELECT `+t.key+`, COUNT(*), SUM(usd_nanos), SUM(tokens) FROM `+t.table+`
			WHERE owner = ? AND (? = '' OR task_id = ?) AND expires_at > ? GROUP BY `+t.key+` ORDER BY `+t.key, owner, taskID, taskID, now)
		if err != nil {
			return nil, fmt.Errorf("drop the holds of %s: %w", owner, err)
		}
		for rows.Next() {
			d := purser.DroppedHolds{Scope: t.scope}
			var usd int64
			if err := rows.Scan(&d.Name, &d.Holds, &usd, &d.Held.Tokens); err != nil {
				rows.Close()
				return nil, fmt.Errorf("drop the holds of %s: %w", owner, err)
			}
			d.Held.USD = budget.USD(usd)
			out = append(out, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("drop the holds of %s: %w", owner, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+t.table+` WHERE owner = ? AND (? = '' OR task_id = ?)`, owner, taskID, taskID); err != nil {
			return nil, fmt.Errorf("drop the holds of %s: %w", owner, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("drop the holds of %s: %w", owner, err)
	}
	return out, nil
}
