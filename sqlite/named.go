package sqlite

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/storerow"
	"github.com/purser-dev/purser/internal/storesql"
)

var _ purser.NamedBudgets = (*Store)(nil)

// CreateBudget records a new named budget, under its parent when it has
// one (which must exist), in one IMMEDIATE transaction.
func (s *Store) CreateBudget(ctx context.Context, b purser.NamedBudget) error {
	vals, err := storerow.NamedBudgetValues(b)
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil) // _txlock=immediate: the write lock is taken now
	if err != nil {
		return fmt.Errorf("create named budget %s: %w", b.Name, err)
	}
	defer tx.Rollback()
	if b.Parent != "" {
		parents, err := storesql.BudgetParents(ctx, sqlDB{tx})
		if err != nil {
			return err
		}
		if err := purser.CheckParent(parents, b.Name, b.Parent); err != nil {
			return fmt.Errorf("create named budget %s: parent: %w", b.Name, err)
		}
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO named_budgets (`+storerow.NamedBudgetColumns+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO NOTHING`, vals...)
	if err != nil {
		return fmt.Errorf("create named budget %s: %w", b.Name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("create named budget %s: %w", b.Name, purser.ErrBudgetExists)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create named budget %s: %w", b.Name, err)
	}
	return nil
}

// SetBudgetParent moves a named budget under parent ("" makes it a root),
// refusing a loop, and records the move as a raise, in one IMMEDIATE
// transaction.
func (s *Store) SetBudgetParent(ctx context.Context, name, parent, by, source string, at time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil) // _txlock=immediate: the write lock is taken now
	if err != nil {
		return fmt.Errorf("move named budget %s: %w", name, err)
	}
	defer tx.Rollback()
	b, err := storesql.NamedBudget(ctx, sqlDB{tx}, name)
	if err != nil {
		return err
	}
	parents, err := storesql.BudgetParents(ctx, sqlDB{tx})
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
	if _, err := tx.ExecContext(ctx, `UPDATE named_budgets SET parent = ? WHERE name = ?`, parent, name); err != nil {
		return fmt.Errorf("move named budget %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO named_budget_raises (name, at, by_whom, source, from_json, to_json) VALUES (?, ?, ?, ?, ?, ?)`,
		name, nanos(at), by, storerow.ParentMoveSource(b.Parent, parent, source), from, to); err != nil {
		return fmt.Errorf("move named budget %s: %w", name, err)
	}
	return tx.Commit()
}

// NamedBudget returns one named budget.
func (s *Store) NamedBudget(ctx context.Context, name string) (purser.NamedBudget, error) {
	return storesql.NamedBudget(ctx, sqlDB{s.db}, name)
}

// NamedBudgetList returns every named budget, by name.
func (s *Store) NamedBudgetList(ctx context.Context) ([]purser.NamedBudget, error) {
	return storesql.NamedBudgetList(ctx, sqlDB{s.db})
}

// RaiseBudget replaces a named budget's tiers and records the raise, in one
// transaction.
func (s *Store) RaiseBudget(ctx context.Context, r purser.NamedBudgetRaise) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("raise named budget %s: %w", r.Name, err)
	}
	defer tx.Rollback()
	b, err := storesql.NamedBudget(ctx, sqlDB{tx}, r.Name)
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
	return storesql.BudgetRaises(ctx, sqlDB{s.db}, name)
}

// DrawFrom records that a run draws from the named budgets.
func (s *Store) DrawFrom(ctx context.Context, runID string, names []string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("run %s draws from %s: %w", runID, strings.Join(names, ","), err)
	}
	defer tx.Rollback()
	for _, n := range names {
		if _, err := storesql.NamedBudget(ctx, sqlDB{tx}, n); err != nil {
			return fmt.Errorf("run %s draws from %w", runID, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_draws (run_id, name) VALUES (?, ?) ON CONFLICT DO NOTHING`, runID, n); err != nil {
			return fmt.Errorf("run %s draws from %s: %w", runID, n, err)
		}
	}
	return tx.Commit()
}

// NamedBudgetStatus is a named budget's spend and holds in the window
// holding now.
func (s *Store) NamedBudgetStatus(ctx context.Context, name string, now time.Time) (purser.NamedBudgetStatus, error) {
	return storesql.NamedStatus(ctx, sqlDB{s.db}, name, now, storesql.Nanos(time.Now()))
}

// ReserveNamed holds want on a named budget and its every ancestor.
func (s *Store) ReserveNamed(ctx context.Context, name string, h purser.Holder, want budget.Amount, now time.Time, ttl time.Duration) (func(), error) {
	return s.ReserveNamedAll(ctx, []string{name}, h, want, now, ttl)
}

// ReserveNamedAll holds want on every budget in names and each of their
// ancestors, or on none, atomically across processes: the checks and the
// holds are one IMMEDIATE transaction. The holds are recorded as h's.
func (s *Store) ReserveNamedAll(ctx context.Context, names []string, h purser.Holder, want budget.Amount, now time.Time, ttl time.Duration) (func(), error) {
	what := "reserve on named budget " + strings.Join(names, ", ")
	tx, err := s.db.BeginTx(ctx, nil) // _txlock=immediate: the write lock is taken now
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback()
	parents, err := storesql.BudgetParents(ctx, sqlDB{tx})
	if err != nil {
		return nil, err
	}
	nodes, err := storerow.TreeNodes(parents, names)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		st, err := storesql.NamedStatus(ctx, sqlDB{tx}, n, now, storesql.Nanos(time.Now()))
		if err != nil {
			return nil, err
		}
		if err := budget.FitNamed(n, want, st.Headroom()); err != nil {
			return nil, err
		}
	}
	expires := time.Now().Add(ttl).UnixNano()
	ids := make([]int64, 0, len(nodes))
	for _, n := range nodes {
		if _, err := tx.ExecContext(ctx, `DELETE FROM named_reservations WHERE name = ? AND expires_at <= ?`, n, time.Now().UnixNano()); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO named_reservations (name, usd_nanos, tokens, expires_at, owner, task_id) VALUES (?, ?, ?, ?, ?, ?)`,
			n, int64(want.USD), want.Tokens, expires, h.Owner, h.TaskID)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		id, _ := res.LastInsertId()
		ids = append(ids, id)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return func() {
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		_, _ = s.db.ExecContext(context.WithoutCancel(ctx), `DELETE FROM named_reservations WHERE id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args...)
	}, nil
}

// RunDraws returns the named budgets a run draws from and their
// ancestors, roots first, then by name.
func (s *Store) RunDraws(ctx context.Context, runID string) ([]string, error) {
	return storesql.RunDraws(ctx, sqlDB{s.db}, runID)
}

// AppendNamedUsage copies ledger entries of runs another database keeps
// into named_usage, in one IMMEDIATE transaction, each once per run and key.
func (s *Store) AppendNamedUsage(ctx context.Context, entries ...purser.LedgerEntry) error {
	if err := purser.CheckLedgerKeys(entries); err != nil {
		return fmt.Errorf("copy usage to the budgets database: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil) // _txlock=immediate: the write lock is taken now
	if err != nil {
		return fmt.Errorf("copy usage to the budgets database: %w", err)
	}
	defer tx.Rollback()
	if err := storesql.AppendNamedUsage(ctx, sqlDB{tx}, entries); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("copy usage to the budgets database: %w", err)
	}
	return nil
}
