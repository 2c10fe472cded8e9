package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

var (
	_ purser.HoldDropper = (*Store)(nil)
	_ purser.HoldReaper  = (*Store)(nil)
)

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

// Holders lists the owners and tasks of the unexpired holds with a holder,
// on runs and named budgets, by owner then task.
func (s *Store) Holders(ctx context.Context) ([]purser.Holder, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT owner, task_id FROM run_reservations WHERE owner <> '' AND expires_at > ?1
		UNION SELECT owner, task_id FROM named_reservations WHERE owner <> '' AND expires_at > ?1
		ORDER BY 1, 2`, time.Now().UnixNano())
	if err != nil {
		return nil, fmt.Errorf("list the holders of holds: %w", err)
	}
	defer rows.Close()
	out := []purser.Holder{}
	for rows.Next() {
		var h purser.Holder
		if err := rows.Scan(&h.Owner, &h.TaskID); err != nil {
			return nil, fmt.Errorf("list the holders of holds: %w", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the holders of holds: %w", err)
	}
	return out, nil
}

// DropLapsedHolds deletes, in one IMMEDIATE transaction, the holds placed
// for a task whose job is leased to the hold's owner with its lease run
// out, and returns what the unexpired ones held.
func (s *Store) DropLapsedHolds(ctx context.Context) ([]purser.DroppedHolds, error) {
	out := []purser.DroppedHolds{}
	now := time.Now().UnixNano()
	// Waiting calls ask every second or so, and there is rarely anything to
	// drop: a read first, so that they do not queue for the write lock.
	var some bool
	if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM jobs j WHERE j.state = 'leased' AND j.lease_until <= ?1
		AND (EXISTS (SELECT 1 FROM run_reservations r WHERE r.task_id = j.task_id AND r.owner = j.worker AND r.owner <> '')
		  OR EXISTS (SELECT 1 FROM named_reservations n WHERE n.task_id = j.task_id AND n.owner = j.worker AND n.owner <> '')))`, now).Scan(&some); err != nil {
		return nil, fmt.Errorf("drop the holds of lapsed leases: %w", err)
	}
	if !some {
		return out, nil
	}
	tx, err := s.db.BeginTx(ctx, nil) // _txlock=immediate: the write lock is taken now
	if err != nil {
		return nil, fmt.Errorf("drop the holds of lapsed leases: %w", err)
	}
	defer tx.Rollback()
	for _, t := range []struct {
		table, key string
		scope      budget.Scope
	}{{"run_reservations", "run_id", budget.ScopeRun}, {"named_reservations", "name", budget.ScopeNamed}} {
		lapsed := `owner <> '' AND EXISTS (SELECT 1 FROM jobs j WHERE j.task_id = ` + t.table + `.task_id
			AND j.worker = ` + t.table + `.owner AND j.state = 'leased' AND j.lease_until <= ?)`
		rows, err := tx.QueryContext(ctx, `SELECT owner, `+t.key+`, COUNT(*), SUM(usd_nanos), SUM(tokens) FROM `+t.table+`
			WHERE `+lapsed+` AND expires_at > ? GROUP BY owner, `+t.key+` ORDER BY owner, `+t.key, now, now)
		if err != nil {
			return nil, fmt.Errorf("drop the holds of lapsed leases: %w", err)
		}
		for rows.Next() {
			d := purser.DroppedHolds{Scope: t.scope}
			var usd int64
			if err := rows.Scan(&d.Owner, &d.Name, &d.Holds, &usd, &d.Held.Tokens); err != nil {
				rows.Close()
				return nil, fmt.Errorf("drop the holds of lapsed leases: %w", err)
			}
			d.Held.USD = budget.USD(usd)
			out = append(out, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("drop the holds of lapsed leases: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+t.table+` WHERE `+lapsed, now); err != nil {
			return nil, fmt.Errorf("drop the holds of lapsed leases: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("drop the holds of lapsed leases: %w", err)
	}
	return out, nil
}
