package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

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
	res, err := s.db.ExecContext(ctx, `INSERT INTO named_budgets (`+storerow.NamedBudgetColumns+`) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (name) DO NOTHING`, vals...)
	if err != nil {
		return fmt.Errorf("create named budget %s: %w", b.Name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("create named budget %s: %w", b.Name, purser.ErrBudgetExists)
	}
	return nil
}

type rowQuerier interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}

func namedBudget(ctx context.Context, q rowQuerier, name string) (purser.NamedBudget, error) {
	return storerow.NamedBudget(q.QueryRowContext(ctx, `SELECT `+storerow.NamedBudgetColumns+` FROM named_budgets WHERE name = ?`, name), name)
}

// NamedBudget returns one named budget.
func (s *Store) NamedBudget(ctx context.Context, name string) (purser.NamedBudget, error) {
	return namedBudget(ctx, s.db, name)
}

// NamedBudgetList returns every named budget, by name.
func (s *Store) NamedBudgetList(ctx context.Context) ([]purser.NamedBudget, error) {
	out, err := query(ctx, s.db, "named budgets", storerow.ScanNamedBudget, `SELECT `+storerow.NamedBudgetColumns+` FROM named_budgets ORDER BY name`)
	if out == nil && err == nil {
		out = []purser.NamedBudget{}
	}
	return out, err
}

// RaiseBudget replaces a named budget's tiers and records the raise, in one
// transaction.
func (s *Store) RaiseBudget(ctx context.Context, r purser.NamedBudgetRaise) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("raise named budget %s: %w", r.Name, err)
	}
	defer tx.Rollback()
	b, err := namedBudget(ctx, tx, r.Name)
	if err != nil {
		return err
	}
	from, to, err := storerow.RaiseJSON(b, r)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE named_budgets SET budget_json = ? WHERE name = ?`, to, r.Name); err != nil {
		return fmt.Errorf("raise named budget %s: %w", r.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO named_budget_raises (name, at, by_whom, source, from_json, to_json) VALUES (?, ?, ?, ?, ?, ?)`,
		r.Name, nanos(r.At), r.By, r.Source, from, to); err != nil {
		return fmt.Errorf("raise named budget %s: %w", r.Name, err)
	}
	return tx.Commit()
}

// BudgetRaises returns a named budget's raises, oldest first.
func (s *Store) BudgetRaises(ctx context.Context, name string) ([]purser.NamedBudgetRaise, error) {
	return query(ctx, s.db, "raises of named budget "+name, storerow.Of(name, storerow.ScanBudgetRaise),
		`SELECT `+storerow.BudgetChangeColumns+` FROM named_budget_raises WHERE name = ? ORDER BY id`, name)
}

// DrawFrom records that a run draws from the named budgets.
func (s *Store) DrawFrom(ctx context.Context, runID string, names []string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("run %s draws from %s: %w", runID, strings.Join(names, ","), err)
	}
	defer tx.Rollback()
	for _, n := range names {
		if _, err := namedBudget(ctx, tx, n); err != nil {
			return fmt.Errorf("run %s draws from %w", runID, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_draws (run_id, name) VALUES (?, ?) ON CONFLICT DO NOTHING`, runID, n); err != nil {
			return fmt.Errorf("run %s draws from %s: %w", runID, n, err)
		}
	}
	return tx.Commit()
}

func namedStatus(ctx context.Context, q rowQuerier, name string, now time.Time) (purser.NamedBudgetStatus, error) {
	b, err := namedBudget(ctx, q, name)
	if err != nil {
		return purser.NamedBudgetStatus{}, err
	}
	st, err := b.StatusAt(now)
	if err != nil {
		return st, err
	}
	if err := storerow.ScanNamedSpend(q.QueryRowContext(ctx, `SELECT
			COALESCE((SELECT SUM(u.usd_nanos) FROM usage u JOIN run_draws d ON d.run_id = u.run_id WHERE d.name = ? AND u.at >= ? AND u.at < ?), 0),
			COALESCE((SELECT SUM(u.input_tokens + u.output_tokens) FROM usage u JOIN run_draws d ON d.run_id = u.run_id WHERE d.name = ? AND u.at >= ? AND u.at < ?), 0),
			COALESCE((SELECT SUM(usd_nanos) FROM named_reservations WHERE name = ? AND expires_at > ?), 0),
			COALESCE((SELECT SUM(tokens) FROM named_reservations WHERE name = ? AND expires_at > ?), 0)`,
		name, nanos(st.WindowStart), nanos(st.WindowEnd), name, nanos(st.WindowStart), nanos(st.WindowEnd), name, time.Now().UnixNano(), name, time.Now().UnixNano()),
		&st); err != nil {
		return st, err
	}
	rows, err := q.QueryContext(ctx, `SELECT run_id FROM run_draws WHERE name = ? ORDER BY run_id`, name)
	if err != nil {
		return st, fmt.Errorf("runs drawing from %s: %w", name, err)
	}
	defer rows.Close()
	if st.Runs, err = storerow.Collect(rows, storerow.ScanString); err != nil {
		return st, fmt.Errorf("runs drawing from %s: %w", name, err)
	}
	return st, nil
}

// NamedBudgetStatus is a named budget's spend and holds in the window
// holding now.
func (s *Store) NamedBudgetStatus(ctx context.Context, name string, now time.Time) (purser.NamedBudgetStatus, error) {
	return namedStatus(ctx, s.db, name, now)
}

// ReserveNamed holds want against a named budget, atomically across
// processes: the check and the hold are one IMMEDIATE transaction. The
// hold is recorded as h's.
func (s *Store) ReserveNamed(ctx context.Context, name string, h purser.Holder, want budget.Amount, now time.Time, ttl time.Duration) (func(), error) {
	tx, err := s.db.BeginTx(ctx, nil) // _txlock=immediate: the write lock is taken now
	if err != nil {
		return nil, fmt.Errorf("reserve on named budget %s: %w", name, err)
	}
	defer tx.Rollback()
	st, err := namedStatus(ctx, tx, name, now)
	if err != nil {
		return nil, err
	}
	if err := budget.FitNamed(name, want, st.Headroom()); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM named_reservations WHERE name = ? AND expires_at <= ?`, name, time.Now().UnixNano()); err != nil {
		return nil, fmt.Errorf("reserve on named budget %s: %w", name, err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO named_reservations (name, usd_nanos, tokens, expires_at, owner, task_id) VALUES (?, ?, ?, ?, ?, ?)`,
		name, int64(want.USD), want.Tokens, time.Now().Add(ttl).UnixNano(), h.Owner, h.TaskID)
	if err != nil {
		return nil, fmt.Errorf("reserve on named budget %s: %w", name, err)
	}
	id, _ := res.LastInsertId()
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("reserve on named budget %s: %w", name, err)
	}
	return func() {
		_, _ = s.db.ExecContext(context.WithoutCancel(ctx), `DELETE FROM named_reservations WHERE id = ?`, id)
	}, nil
}

// RunDraws returns the named budgets a run draws from, by name.
func (s *Store) RunDraws(ctx context.Context, runID string) ([]string, error) {
	return query(ctx, s.db, "budgets run "+runID+" draws from", storerow.ScanString, `SELECT name FROM run_draws WHERE run_id = ? ORDER BY name`, runID)
}
