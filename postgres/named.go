package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/storerow"
)

var _ purser.NamedBudgets = (*Store)(nil)

// CreateBudget records a new named budget.
func (s *Store) CreateBudget(ctx context.Context, b purser.NamedBudget) error {
	vals, err := storerow.NamedBudgetValues(b)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO named_budgets (`+storerow.NamedBudgetColumns+`) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (name) DO NOTHING`, vals...)
	if err != nil {
		return fmt.Errorf("create named budget %s: %w", b.Name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("create named budget %s: %w", b.Name, purser.ErrBudgetExists)
	}
	return nil
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func namedBudget(ctx context.Context, q querier, name string) (purser.NamedBudget, error) {
	return storerow.NamedBudget(q.QueryRow(ctx, `SELECT `+storerow.NamedBudgetColumns+` FROM named_budgets WHERE name = $1`, name), name)
}

// NamedBudget returns one named budget.
func (s *Store) NamedBudget(ctx context.Context, name string) (purser.NamedBudget, error) {
	return namedBudget(ctx, s.pool, name)
}

// NamedBudgetList returns every named budget, by name.
func (s *Store) NamedBudgetList(ctx context.Context) ([]purser.NamedBudget, error) {
	out, err := collect(ctx, s, "named budgets", storerow.ScanNamedBudget, `SELECT `+storerow.NamedBudgetColumns+` FROM named_budgets ORDER BY name`)
	if out == nil && err == nil {
		out = []purser.NamedBudget{}
	}
	return out, err
}

// RaiseBudget replaces a named budget's tiers and records the raise, in one
// transaction.
func (s *Store) RaiseBudget(ctx context.Context, r purser.NamedBudgetRaise) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b, err := namedBudget(ctx, tx, r.Name)
		if err != nil {
			return err
		}
		from, to, err := storerow.RaiseJSON(b, r)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE named_budgets SET budget_json = $1 WHERE name = $2`, to, r.Name); err != nil {
			return fmt.Errorf("raise named budget %s: %w", r.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO named_budget_raises (name, at, by_whom, source, from_json, to_json) VALUES ($1, $2, $3, $4, $5, $6)`,
			r.Name, nanos(r.At), r.By, r.Source, from, to); err != nil {
			return fmt.Errorf("raise named budget %s: %w", r.Name, err)
		}
		return nil
	})
}

// BudgetRaises returns a named budget's raises, oldest first.
func (s *Store) BudgetRaises(ctx context.Context, name string) ([]purser.NamedBudgetRaise, error) {
	return collect(ctx, s, "raises of named budget "+name, storerow.Of(name, storerow.ScanBudgetRaise),
		`SELECT `+storerow.BudgetChangeColumns+` FROM named_budget_raises WHERE name = $1 ORDER BY id`, name)
}

// DrawFrom records that a run draws from the named budgets.
func (s *Store) DrawFrom(ctx context.Context, runID string, names []string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, n := range names {
			if _, err := namedBudget(ctx, tx, n); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO run_draws (run_id, name) VALUES ($1, $2) ON CONFLICT DO NOTHING`, runID, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("run %s draws from %s: %w", runID, strings.Join(names, ","), err)
	}
	return nil
}

func namedStatus(ctx context.Context, q querier, name string, now time.Time) (purser.NamedBudgetStatus, error) {
	b, err := namedBudget(ctx, q, name)
	if err != nil {
		return purser.NamedBudgetStatus{}, err
	}
	st, err := b.StatusAt(now)
	if err != nil {
		return st, err
	}
	if err := storerow.ScanNamedSpend(q.QueryRow(ctx, `SELECT
			COALESCE((SELECT SUM(u.usd_nanos) FROM usage u JOIN run_draws d ON d.run_id = u.run_id WHERE d.name = $1 AND u.at >= $2 AND u.at < $3), 0)::bigint,
			COALESCE((SELECT SUM(u.input_tokens + u.output_tokens) FROM usage u JOIN run_draws d ON d.run_id = u.run_id WHERE d.name = $1 AND u.at >= $2 AND u.at < $3), 0)::bigint,
			COALESCE((SELECT SUM(usd_nanos) FROM named_reservations WHERE name = $1 AND expires_at > `+serverNanos+`), 0)::bigint,
			COALESCE((SELECT SUM(tokens) FROM named_reservations WHERE name = $1 AND expires_at > `+serverNanos+`), 0)::bigint`,
		name, nanos(st.WindowStart), nanos(st.WindowEnd)), &st); err != nil {
		return st, err
	}
	rows, err := q.Query(ctx, `SELECT run_id FROM run_draws WHERE name = $1 ORDER BY run_id`, name)
	if err != nil {
		return st, fmt.Errorf("runs drawing from %s: %w", name, err)
	}
	if st.Runs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return st, fmt.Errorf("runs drawing from %s: %w", name, err)
	}
	return st, nil
}

// NamedBudgetStatus is a named budget's spend and holds in the window
// holding now.
func (s *Store) NamedBudgetStatus(ctx context.Context, name string, now time.Time) (purser.NamedBudgetStatus, error) {
	return namedStatus(ctx, s.pool, name, now)
}

// ReserveNamed holds want against a named budget, atomically across every
// process and host: one transaction takes the budget's advisory lock, so
// holds on one budget are decided one at a time. The hold is recorded as
// h's.
func (s *Store) ReserveNamed(ctx context.Context, name string, h purser.Holder, want budget.Amount, now time.Time, ttl time.Duration) (func(), error) {
	var id int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('purser named budget ' || current_schema() || ' ' || $1, 0))`, name); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM named_reservations WHERE name = $1 AND expires_at <= `+serverNanos, name); err != nil {
			return err
		}
		st, err := namedStatus(ctx, tx, name, now)
		if err != nil {
			return err
		}
		if err := budget.FitNamed(name, want, st.Headroom()); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO named_reservations (name, usd_nanos, tokens, expires_at, owner, task_id) VALUES ($1, $2, $3, `+serverNanos+` + $4, $5, $6) RETURNING id`,
			name, int64(want.USD), want.Tokens, ttl.Nanoseconds(), h.Owner, h.TaskID).Scan(&id)
	})
	var ibe *budget.InsufficientBudgetError
	if errors.As(err, &ibe) || errors.Is(err, purser.ErrNotFound) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("reserve on named budget %s: %w", name, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = s.pool.Exec(ctx, `DELETE FROM named_reservations WHERE id = $1`, id)
	}, nil
}

// RunDraws returns the named budgets a run draws from, by name.
func (s *Store) RunDraws(ctx context.Context, runID string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT name FROM run_draws WHERE run_id = $1 ORDER BY name`, runID)
	if err != nil {
		return nil, fmt.Errorf("budgets run %s draws from: %w", runID, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("budgets run %s draws from: %w", runID, err)
	}
	return names, nil
}
