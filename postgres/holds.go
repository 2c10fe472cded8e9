package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

var (
	_ purser.HoldDropper = (*Store)(nil)
	_ purser.HoldReaper  = (*Store)(nil)
)

// holdTables are the tables of holds, and for run holds the CTE that takes
// what a statement dropped off the runs' held sums (runDroppedSums).
var holdTables = []struct {
	table, key, unhold string
	scope              budget.Scope
}{{"run_reservations", "run_id", runDroppedSums, budget.ScopeRun}, {"named_reservations", "name", "", budget.ScopeNamed}}

// DropHolds deletes the holds owner placed for taskID (every task of
// owner's when taskID is ""), on runs and named budgets, in one
// transaction, and returns what the unexpired ones held, by the server's
// clock.
func (s *Store) DropHolds(ctx context.Context, owner, taskID string) ([]purser.DroppedHolds, error) {
	out := []purser.DroppedHolds{}
	if owner == "" {
		return out, nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = out[:0]
		for _, t := range holdTables {
			rows, err := tx.Query(ctx, `WITH dropped AS (
					DELETE FROM `+t.table+` WHERE owner = $1 AND ($2 = '' OR task_id = $2)
					RETURNING `+t.key+` AS k, usd_nanos, tokens, expires_at)`+t.unhold+`
				SELECT k, COUNT(*), SUM(usd_nanos)::bigint, SUM(tokens)::bigint FROM dropped
				WHERE expires_at > `+serverNanos+` GROUP BY k ORDER BY k`, owner, taskID)
			if err != nil {
				return err
			}
			got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (purser.DroppedHolds, error) {
				d := purser.DroppedHolds{Scope: t.scope}
				var usd int64
				err := r.Scan(&d.Name, &d.Holds, &usd, &d.Held.Tokens)
				d.Held.USD = budget.USD(usd)
				return d, err
			})
			if err != nil {
				return err
			}
			out = append(out, got...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("drop the holds of %s: %w", owner, err)
	}
	return out, nil
}

// Holders lists the owners and tasks of the unexpired holds (by the
// server's clock) with a holder, on runs and named budgets, by owner then
// task.
func (s *Store) Holders(ctx context.Context) ([]purser.Holder, error) {
	rows, err := s.pool.Query(ctx, `SELECT owner, task_id FROM run_reservations WHERE owner <> '' AND expires_at > `+serverNanos+`
		UNION SELECT owner, task_id FROM named_reservations WHERE owner <> '' AND expires_at > `+serverNanos+`
		ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("list the holders of holds: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (purser.Holder, error) {
		var h purser.Holder
		err := r.Scan(&h.Owner, &h.TaskID)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("list the holders of holds: %w", err)
	}
	if out == nil {
		out = []purser.Holder{}
	}
	return out, nil
}

// DropLapsedHolds deletes, in one transaction, the holds placed for a task
// whose job is leased to the hold's owner with its lease run out by the
// server's clock, and returns what the unexpired ones held.
func (s *Store) DropLapsedHolds(ctx context.Context) ([]purser.DroppedHolds, error) {
	out := []purser.DroppedHolds{}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = out[:0]
		for _, t := range holdTables {
			rows, err := tx.Query(ctx, `WITH dropped AS (
					DELETE FROM `+t.table+` r WHERE r.owner <> '' AND EXISTS (SELECT 1 FROM jobs j WHERE j.task_id = r.task_id
						AND j.worker = r.owner AND j.state = 'leased' AND j.lease_until <= `+serverNanos+`)
					RETURNING r.owner AS o, r.`+t.key+` AS k, r.usd_nanos, r.tokens, r.expires_at)`+t.unhold+`
				SELECT o, k, COUNT(*), SUM(usd_nanos)::bigint, SUM(tokens)::bigint FROM dropped
				WHERE expires_at > `+serverNanos+` GROUP BY o, k ORDER BY o, k`)
			if err != nil {
				return err
			}
			got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (purser.DroppedHolds, error) {
				d := purser.DroppedHolds{Scope: t.scope}
				var usd int64
				err := r.Scan(&d.Owner, &d.Name, &d.Holds, &usd, &d.Held.Tokens)
				d.Held.USD = budget.USD(usd)
				return d, err
			})
			if err != nil {
				return err
			}
			out = append(out, got...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("drop the holds of lapsed leases: %w", err)
	}
	return out, nil
}
