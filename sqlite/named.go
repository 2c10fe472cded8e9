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
		parents, err := budgetParents(ctx, tx)
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

// budgetParents is every named budget's parent, by name ("" for a root).
func budgetParents(ctx context.Context, q rowQuerier) (map[string]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, parent FROM named_budgets`)
	if err != nil {
		return nil, fmt.Errorf("named budgets' parents: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var n, p string
		if err := rows.Scan(&n, &p); err != nil {
			return nil, fmt.Errorf("named budgets' parents: %w", err)
		}
		out[n] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("named budgets' parents: %w", err)
	}
	return out, nil
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
	b, err := namedBudget(ctx, tx, name)
	if err != nil {
		return err
	}
	parents, err := budgetParents(ctx, tx)
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
	now0 := time.Now().UnixNano()
	if err := storerow.ScanNamedSpend(q.QueryRowContext(ctx, subtreeRuns+`
		SELECT
			COALESCE((SELECT SUM(u.usd_nanos) FROM usage u WHERE u.run_id IN (SELECT run_id FROM runs) AND u.at >= ?2 AND u.at < ?3), 0),
			COALESCE((SELECT SUM(u.input_tokens + u.output_tokens) FROM usage u WHERE u.run_id IN (SELECT run_id FROM runs) AND u.at >= ?2 AND u.at < ?3), 0),
			COALESCE((SELECT SUM(usd_nanos) FROM named_reservations WHERE name = ?1 AND expires_at > ?4), 0),
			COALESCE((SELECT SUM(tokens) FROM named_reservations WHERE name = ?1 AND expires_at > ?4), 0)`,
		name, nanos(st.WindowStart), nanos(st.WindowEnd), now0),
		&st); err != nil {
		return st, err
	}
	rows, err := q.QueryContext(ctx, subtreeRuns+` SELECT run_id FROM runs ORDER BY run_id`, name)
	if err != nil {
		return st, fmt.Errorf("runs drawing from %s: %w", name, err)
	}
	defer rows.Close()
	if st.Runs, err = storerow.Collect(rows, storerow.ScanString); err != nil {
		return st, fmt.Errorf("runs drawing from %s: %w", name, err)
	}
	return st, nil
}

// subtreeRuns names, for the budget ?1, the runs whose spend it counts:
// those drawing from it or from any budget under it (UNION, not UNION ALL,
// so that even a loop ends).
const subtreeRuns = `WITH RECURSIVE sub(name) AS (
		SELECT ?1 UNION SELECT b.name FROM named_budgets b JOIN sub ON b.parent = sub.name),
	runs(run_id) AS (SELECT DISTINCT run_id FROM run_draws WHERE name IN (SELECT name FROM sub))`

// NamedBudgetStatus is a named budget's spend and holds in the window
// holding now.
func (s *Store) NamedBudgetStatus(ctx context.Context, name string, now time.Time) (purser.NamedBudgetStatus, error) {
	return namedStatus(ctx, s.db, name, now)
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
	parents, err := budgetParents(ctx, tx)
	if err != nil {
		return nil, err
	}
	nodes, err := storerow.TreeNodes(parents, names)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		st, err := namedStatus(ctx, tx, n, now)
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
	rows, err := s.db.QueryContext(ctx, drawnLineage, runID)
	if err != nil {
		return nil, fmt.Errorf("budgets run %s draws from: %w", runID, err)
	}
	defer rows.Close()
	parents := map[string]string{}
	for rows.Next() {
		var n, p string
		if err := rows.Scan(&n, &p); err != nil {
			return nil, fmt.Errorf("budgets run %s draws from: %w", runID, err)
		}
		parents[n] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("budgets run %s draws from: %w", runID, err)
	}
	return storerow.RootsFirst(parents), nil
}

// drawnLineage is the budgets the run ?1 draws from and their ancestors,
// each with its parent.
const drawnLineage = `WITH RECURSIVE up(name) AS (
		SELECT name FROM run_draws WHERE run_id = ?1
		UNION SELECT b.parent FROM named_budgets b JOIN up ON b.name = up.name WHERE b.parent <> '')
	SELECT b.name, b.parent FROM named_budgets b WHERE b.name IN (SELECT name FROM up)`
