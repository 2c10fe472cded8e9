package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/storerow"
	"github.com/purser-dev/purser/internal/storesql"
)

var _ purser.NamedBudgets = (*Store)(nil)

// CreateBudget records a new named budget, under its parent when it has
// one (which must exist). The tree's lock makes the check and the insert
// one decision across processes.
func (s *Store) CreateBudget(ctx context.Context, b purser.NamedBudget) error {
	vals, err := storerow.NamedBudgetValues(b)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if b.Parent != "" {
			if err := lockTree(ctx, tx); err != nil {
				return fmt.Errorf("create named budget %s: %w", b.Name, err)
			}
			parents, err := storesql.BudgetParents(ctx, pgDB{tx})
			if err != nil {
				return err
			}
			if err := purser.CheckParent(parents, b.Name, b.Parent); err != nil {
				return fmt.Errorf("create named budget %s: parent: %w", b.Name, err)
			}
		}
		tag, err := tx.Exec(ctx, `INSERT INTO named_budgets (`+storerow.NamedBudgetColumns+`) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (name) DO NOTHING`, vals...)
		if err != nil {
			return fmt.Errorf("create named budget %s: %w", b.Name, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("create named budget %s: %w", b.Name, purser.ErrBudgetExists)
		}
		return nil
	})
}

// lockTree serialises the changes of the budgets' parents, so that two
// moves made at once cannot make a loop between them.
func lockTree(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('purser named budget tree ' || current_schema(), 0))`)
	return err
}

// SetBudgetParent moves a named budget under parent ("" makes it a root),
// refusing a loop, and records the move as a raise, in one transaction.
func (s *Store) SetBudgetParent(ctx context.Context, name, parent, by, source string, at time.Time) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockTree(ctx, tx); err != nil {
			return fmt.Errorf("move named budget %s: %w", name, err)
		}
		b, err := storesql.NamedBudget(ctx, pgDB{tx}, name)
		if err != nil {
			return err
		}
		parents, err := storesql.BudgetParents(ctx, pgDB{tx})
		if err != nil {
			return err
		}
		if err := purser.CheckParent(parents, name, parent); err != nil {
			return fmt.Errorf("move named budget %s: %w", name, err)
		}
		from, to, err := storerow.BudgetChangeJSON(b.Budget, b.Budget)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE named_budgets SET parent = $1 WHERE name = $2`, parent, name); err != nil {
			return fmt.Errorf("move named budget %s: %w", name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO named_budget_raises (name, at, by_whom, source, from_json, to_json) VALUES ($1, $2, $3, $4, $5, $6)`,
			name, nanos(at), by, storerow.ParentMoveSource(b.Parent, parent, source), from, to); err != nil {
			return fmt.Errorf("move named budget %s: %w", name, err)
		}
		return nil
	})
}

// NamedBudget returns one named budget.
func (s *Store) NamedBudget(ctx context.Context, name string) (purser.NamedBudget, error) {
	return storesql.NamedBudget(ctx, pgDB{s.pool}, name)
}

// NamedBudgetList returns every named budget, by name.
func (s *Store) NamedBudgetList(ctx context.Context) ([]purser.NamedBudget, error) {
	return storesql.NamedBudgetList(ctx, pgDB{s.pool})
}

// RaiseBudget replaces a named budget's tiers and records the raise, in one
// transaction.
func (s *Store) RaiseBudget(ctx context.Context, r purser.NamedBudgetRaise) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b, err := storesql.NamedBudget(ctx, pgDB{tx}, r.Name)
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
	return storesql.BudgetRaises(ctx, pgDB{s.pool}, name)
}

// DrawFrom records that a run draws from the named budgets.
func (s *Store) DrawFrom(ctx context.Context, runID string, names []string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, n := range names {
			if _, err := storesql.NamedBudget(ctx, pgDB{tx}, n); err != nil {
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

// NamedBudgetStatus is a named budget's spend and holds in the window
// holding now.
func (s *Store) NamedBudgetStatus(ctx context.Context, name string, now time.Time) (purser.NamedBudgetStatus, error) {
	return storesql.NamedStatus(ctx, pgDB{s.pool}, name, now, serverNanos)
}

// ReserveNamed holds want on a named budget and its every ancestor.
func (s *Store) ReserveNamed(ctx context.Context, name string, h purser.Holder, want budget.Amount, now time.Time, ttl time.Duration) (func(), error) {
	return s.ReserveNamedAll(ctx, []string{name}, h, want, now, ttl)
}

// RunDraws returns the named budgets a run draws from and their
// ancestors, roots first, then by name.
func (s *Store) RunDraws(ctx context.Context, runID string) ([]string, error) {
	return storesql.RunDraws(ctx, pgDB{s.pool}, runID)
}

// AppendNamedUsage copies ledger entries of runs another database keeps
// into named_usage, in one transaction, each once per run and key.
func (s *Store) AppendNamedUsage(ctx context.Context, entries ...purser.LedgerEntry) error {
	if err := purser.CheckLedgerKeys(entries); err != nil {
		return fmt.Errorf("copy usage to the budgets database: %w", err)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return storesql.AppendNamedUsage(ctx, pgDB{tx}, entries)
	})
}
