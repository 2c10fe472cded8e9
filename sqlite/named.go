package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

var _ purser.NamedBudgets = (*Store)(nil)

// CreateBudget records a new named budget.
func (s *Store) CreateBudget(ctx context.Context, b purser.NamedBudget) error {
	if err := b.Validate(); err != nil {
		return fmt.Errorf("named budget %s: %w", b.Name, err)
	}
	cfg, err := json.Marshal(b.Budget)
	if err != nil {
		return err
	}
	if b.CreatedAt.IsZero() {
		b.CreatedAt = time.Now()
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO named_budgets (name, budget_json, win, zone, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (name) DO NOTHING`, b.Name, string(cfg), string(b.Window), b.Zone, nanos(b.CreatedAt))
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
	b := purser.NamedBudget{Name: name}
	var cfg, win string
	var created sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT budget_json, win, zone, created_at FROM named_budgets WHERE name = ?`, name).Scan(&cfg, &win, &b.Zone, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return b, fmt.Errorf("named budget %s: %w", name, purser.ErrNotFound)
	}
	if err != nil {
		return b, fmt.Errorf("named budget %s: %w", name, err)
	}
	if err := json.Unmarshal([]byte(cfg), &b.Budget); err != nil {
		return b, fmt.Errorf("named budget %s: %w", name, err)
	}
	b.Window, b.CreatedAt = purser.BudgetWindow(win), fromNanos(created)
	return b, nil
}

// NamedBudget returns one named budget.
func (s *Store) NamedBudget(ctx context.Context, name string) (purser.NamedBudget, error) {
	return namedBudget(ctx, s.db, name)
}

// NamedBudgetList returns every named budget, by name.
func (s *Store) NamedBudgetList(ctx context.Context) ([]purser.NamedBudget, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name FROM named_budgets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("named budgets: %w", err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]purser.NamedBudget, 0, len(names))
	for _, n := range names {
		b, err := s.NamedBudget(ctx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
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
	b.Budget = r.To
	if err := b.Validate(); err != nil {
		return fmt.Errorf("named budget %s: %w", r.Name, err)
	}
	from, err := json.Marshal(r.From)
	if err != nil {
		return err
	}
	to, err := json.Marshal(r.To)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE named_budgets SET budget_json = ? WHERE name = ?`, string(to), r.Name); err != nil {
		return fmt.Errorf("raise named budget %s: %w", r.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO named_budget_raises (name, at, by_whom, source, from_json, to_json) VALUES (?, ?, ?, ?, ?, ?)`,
		r.Name, nanos(r.At), r.By, r.Source, string(from), string(to)); err != nil {
		return fmt.Errorf("raise named budget %s: %w", r.Name, err)
	}
	return tx.Commit()
}

// BudgetRaises returns a named budget's raises, oldest first.
func (s *Store) BudgetRaises(ctx context.Context, name string) ([]purser.NamedBudgetRaise, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT at, by_whom, source, from_json, to_json FROM named_budget_raises WHERE name = ? ORDER BY id`, name)
	if err != nil {
		return nil, fmt.Errorf("raises of named budget %s: %w", name, err)
	}
	defer rows.Close()
	var out []purser.NamedBudgetRaise
	for rows.Next() {
		r := purser.NamedBudgetRaise{Name: name}
		var at sql.NullInt64
		var from, to string
		if err := rows.Scan(&at, &r.By, &r.Source, &from, &to); err != nil {
			return nil, err
		}
		r.At = fromNanos(at)
		if err := json.Unmarshal([]byte(from), &r.From); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(to), &r.To); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
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
	st := purser.NamedBudgetStatus{NamedBudget: b}
	if st.WindowStart, st.WindowEnd, err = b.Window.Bounds(now, b.Zone); err != nil {
		return st, fmt.Errorf("named budget %s: %w", name, err)
	}
	var usd, tokens, heldUSD, heldTokens int64
	if err := q.QueryRowContext(ctx, `SELECT
			COALESCE((SELECT SUM(u.usd_nanos) FROM usage u JOIN run_draws d ON d.run_id = u.run_id WHERE d.name = ? AND u.at >= ? AND u.at < ?), 0),
			COALESCE((SELECT SUM(u.input_tokens + u.output_tokens) FROM usage u JOIN run_draws d ON d.run_id = u.run_id WHERE d.name = ? AND u.at >= ? AND u.at < ?), 0),
			COALESCE((SELECT SUM(usd_nanos) FROM named_reservations WHERE name = ? AND expires_at > ?), 0),
			COALESCE((SELECT SUM(tokens) FROM named_reservations WHERE name = ? AND expires_at > ?), 0)`,
		name, nanos(st.WindowStart), nanos(st.WindowEnd), name, nanos(st.WindowStart), nanos(st.WindowEnd), name, time.Now().UnixNano(), name, time.Now().UnixNano()).
		Scan(&usd, &tokens, &heldUSD, &heldTokens); err != nil {
		return st, fmt.Errorf("named budget %s spend: %w", name, err)
	}
	st.Spent.USD, st.Spent.Tokens = budget.USD(usd), tokens
	st.Held = budget.Amount{USD: budget.USD(heldUSD), Tokens: heldTokens}
	rows, err := q.QueryContext(ctx, `SELECT run_id FROM run_draws WHERE name = ? ORDER BY run_id`, name)
	if err != nil {
		return st, fmt.Errorf("runs drawing from %s: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			return st, err
		}
		st.Runs = append(st.Runs, r)
	}
	return st, rows.Err()
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
	rows, err := s.db.QueryContext(ctx, `SELECT name FROM run_draws WHERE run_id = ? ORDER BY name`, runID)
	if err != nil {
		return nil, fmt.Errorf("budgets run %s draws from: %w", runID, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}
