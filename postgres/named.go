package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

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
	tag, err := s.pool.Exec(ctx, `INSERT INTO named_budgets (name, budget_json, win, zone, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (name) DO NOTHING`, b.Name, string(cfg), string(b.Window), b.Zone, nanos(b.CreatedAt))
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
	b := purser.NamedBudget{Name: name}
	var cfg, win string
	var created int64
	err := q.QueryRow(ctx, `SELECT budget_json, win, zone, created_at FROM named_budgets WHERE name = $1`, name).Scan(&cfg, &win, &b.Zone, &created)
	if errors.Is(err, pgx.ErrNoRows) {
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
	return namedBudget(ctx, s.pool, name)
}

// NamedBudgetList returns every named budget, by name.
func (s *Store) NamedBudgetList(ctx context.Context) ([]purser.NamedBudget, error) {
	rows, err := s.pool.Query(ctx, `SELECT name FROM named_budgets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("named budgets: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("named budgets: %w", err)
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
	from, err := json.Marshal(r.From)
	if err != nil {
		return err
	}
	to, err := json.Marshal(r.To)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b, err := namedBudget(ctx, tx, r.Name)
		if err != nil {
			return err
		}
		b.Budget = r.To
		if err := b.Validate(); err != nil {
			return fmt.Errorf("named budget %s: %w", r.Name, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE named_budgets SET budget_json = $1 WHERE name = $2`, string(to), r.Name); err != nil {
			return fmt.Errorf("raise named budget %s: %w", r.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO named_budget_raises (name, at, by_whom, source, from_json, to_json) VALUES ($1, $2, $3, $4, $5, $6)`,
			r.Name, nanos(r.At), r.By, r.Source, string(from), string(to)); err != nil {
			return fmt.Errorf("raise named budget %s: %w", r.Name, err)
		}
		return nil
	})
}

// BudgetRaises returns a named budget's raises, oldest first.
func (s *Store) BudgetRaises(ctx context.Context, name string) ([]purser.NamedBudgetRaise, error) {
	rows, err := s.pool.Query(ctx, `SELECT at, by_whom, source, from_json, to_json FROM named_budget_raises WHERE name = $1 ORDER BY id`, name)
	if err != nil {
		return nil, fmt.Errorf("raises of named budget %s: %w", name, err)
	}
	defer rows.Close()
	var out []purser.NamedBudgetRaise
	for rows.Next() {
		r := purser.NamedBudgetRaise{Name: name}
		var at int64
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
	st := purser.NamedBudgetStatus{NamedBudget: b}
	if st.WindowStart, st.WindowEnd, err = b.Window.Bounds(now, b.Zone); err != nil {
		return st, fmt.Errorf("named budget %s: %w", name, err)
	}
	var usd, tokens, heldUSD, heldTokens int64
	if err := q.QueryRow(ctx, `SELECT
			COALESCE((SELECT SUM(u.usd_nanos) FROM usage u JOIN run_draws d ON d.run_id = u.run_id WHERE d.name = $1 AND u.at >= $2 AND u.at < $3), 0)::bigint,
			COALESCE((SELECT SUM(u.input_tokens + u.output_tokens) FROM usage u JOIN run_draws d ON d.run_id = u.run_id WHERE d.name = $1 AND u.at >= $2 AND u.at < $3), 0)::bigint,
			COALESCE((SELECT SUM(usd_nanos) FROM named_reservations WHERE name = $1 AND expires_at > `+serverNanos+`), 0)::bigint,
			COALESCE((SELECT SUM(tokens) FROM named_reservations WHERE name = $1 AND expires_at > `+serverNanos+`), 0)::bigint`,
		name, nanos(st.WindowStart), nanos(st.WindowEnd)).Scan(&usd, &tokens, &heldUSD, &heldTokens); err != nil {
		return st, fmt.Errorf("named budget %s spend: %w", name, err)
	}
	st.Spent.USD, st.Spent.Tokens = budget.USD(usd), tokens
	st.Held = budget.Amount{USD: budget.USD(heldUSD), Tokens: heldTokens}
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
