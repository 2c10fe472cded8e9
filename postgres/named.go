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
			parents, err := budgetParents(ctx, tx)
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

// budgetParents is every named budget's parent, by name ("" for a root).
func budgetParents(ctx context.Context, q querier) (map[string]string, error) {
	rows, err := q.Query(ctx, `SELECT name, parent FROM named_budgets`)
	if err != nil {
		return nil, fmt.Errorf("named budgets' parents: %w", err)
	}
	out := map[string]string{}
	var n, p string
	if _, err := pgx.ForEachRow(rows, []any{&n, &p}, func() error { out[n] = p; return nil }); err != nil {
		return nil, fmt.Errorf("named budgets' parents: %w", err)
	}
	return out, nil
}

// SetBudgetParent moves a named budget under parent ("" makes it a root),
// refusing a loop, and records the move as a raise, in one transaction.
func (s *Store) SetBudgetParent(ctx context.Context, name, parent, by, source string, at time.Time) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockTree(ctx, tx); err != nil {
			return fmt.Errorf("move named budget %s: %w", name, err)
		}
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
	if err := storerow.ScanNamedSpend(q.QueryRow(ctx, subtreeRuns+`
		SELECT
			COALESCE((SELECT SUM(u.usd_nanos) FROM usage u WHERE u.run_id IN (SELECT run_id FROM runs) AND u.at >= $2 AND u.at < $3), 0)::bigint,
			COALESCE((SELECT SUM(u.input_tokens + u.output_tokens) FROM usage u WHERE u.run_id IN (SELECT run_id FROM runs) AND u.at >= $2 AND u.at < $3), 0)::bigint,
			COALESCE((SELECT SUM(usd_nanos) FROM named_reservations WHERE name = $1 AND expires_at > `+serverNanos+`), 0)::bigint,
			COALESCE((SELECT SUM(tokens) FROM named_reservations WHERE name = $1 AND expires_at > `+serverNanos+`), 0)::bigint`,
		name, nanos(st.WindowStart), nanos(st.WindowEnd)), &st); err != nil {
		return st, err
	}
	rows, err := q.Query(ctx, subtreeRuns+` SELECT run_id FROM runs ORDER BY run_id`, name)
	if err != nil {
		return st, fmt.Errorf("runs drawing from %s: %w", name, err)
	}
	if st.Runs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return st, fmt.Errorf("runs drawing from %s: %w", name, err)
	}
	return st, nil
}

// subtreeRuns names, for the budget $1, the runs whose spend it counts:
// those drawing from it or from any budget under it (UNION, not UNION ALL,
// so that even a loop ends).
const subtreeRuns = `WITH RECURSIVE sub(name) AS (
		SELECT $1::text UNION SELECT b.name FROM named_budgets b JOIN sub ON b.parent = sub.name),
	runs(run_id) AS (SELECT DISTINCT run_id FROM run_draws WHERE name IN (SELECT name FROM sub))`

// NamedBudgetStatus is a named budget's spend and holds in the window
// holding now.
func (s *Store) NamedBudgetStatus(ctx context.Context, name string, now time.Time) (purser.NamedBudgetStatus, error) {
	return namedStatus(ctx, s.pool, name, now)
}

// ReserveNamed holds want on a named budget and its every ancestor.
func (s *Store) ReserveNamed(ctx context.Context, name string, h purser.Holder, want budget.Amount, now time.Time, ttl time.Duration) (func(), error) {
	return s.ReserveNamedAll(ctx, []string{name}, h, want, now, ttl)
}

// ReserveNamedAll holds want on every budget in names and each of their
// ancestors, or on none, atomically across every process and host. The
// transaction reads the budgets, takes the advisory lock of each tree's
// root (every hold in a tree takes its root's, so holds in one tree are
// decided one at a time), then checks every budget and inserts every hold
// in one guarded statement: four round trips however deep the tree, where
// a hold per budget took six each. The holds are recorded as h's.
func (s *Store) ReserveNamedAll(ctx context.Context, names []string, h purser.Holder, want budget.Amount, now time.Time, ttl time.Duration) (func(), error) {
	var ids []int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `WITH RECURSIVE up(name) AS (
				SELECT unnest($1::text[]) UNION SELECT b.parent FROM named_budgets b JOIN up ON b.name = up.name WHERE b.parent <> '')
			SELECT `+storerow.NamedBudgetColumns+` FROM named_budgets WHERE name IN (SELECT name FROM up)`, names)
		if err != nil {
			return err
		}
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (purser.NamedBudget, error) { return storerow.ScanNamedBudget(r) })
		if err != nil {
			return err
		}
		byName, parents := map[string]purser.NamedBudget{}, map[string]string{}
		for _, b := range got {
			byName[b.Name], parents[b.Name] = b, b.Parent
		}
		nodes, err := storerow.TreeNodes(parents, names)
		if err != nil {
			return err
		}
		var roots []string
		for _, n := range nodes {
			if parents[n] == "" {
				roots = append(roots, n) // sorted: TreeNodes puts roots first, by name
			}
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('purser named budget ' || current_schema() || ' ' || r, 0))
			FROM unnest($1::text[]) WITH ORDINALITY AS t(r, i) ORDER BY i`, roots); err != nil {
			return err
		}
		statuses := make([]purser.NamedBudgetStatus, len(nodes))
		starts, ends, capUSD, capTokens := make([]int64, len(nodes)), make([]int64, len(nodes)), make([]int64, len(nodes)), make([]int64, len(nodes))
		for i, n := range nodes {
			if statuses[i], err = byName[n].StatusAt(now); err != nil {
				return err
			}
			caps := statuses[i].Caps()
			starts[i], ends[i], capUSD[i], capTokens[i] = nanos(statuses[i].WindowStart), nanos(statuses[i].WindowEnd), int64(caps.USD), caps.Tokens
		}
		// One statement checks every budget and, only if the hold fits in
		// all of them, places it on each; it returns what it read of each
		// budget so that a refusal names the one that is short.
		rows, err = tx.Query(ctx, `WITH n AS (
				SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[]) WITH ORDINALITY AS n(name, ws, we, cap_usd, cap_tokens, i)),
			st AS (
				SELECT n.name, n.i, n.cap_usd, n.cap_tokens, s.usd, s.tokens, h.usd AS held_usd, h.tokens AS held_tokens FROM n,
				LATERAL (
					WITH RECURSIVE sub(name) AS (SELECT n.name UNION SELECT b.name FROM named_budgets b JOIN sub ON b.parent = sub.name)
					SELECT COALESCE(SUM(u.usd_nanos), 0)::bigint AS usd, COALESCE(SUM(u.input_tokens + u.output_tokens), 0)::bigint AS tokens
					FROM usage u WHERE u.run_id IN (SELECT DISTINCT run_id FROM run_draws WHERE name IN (SELECT name FROM sub)) AND u.at >= n.ws AND u.at < n.we) s,
				LATERAL (
					SELECT COALESCE(SUM(usd_nanos), 0)::bigint AS usd, COALESCE(SUM(tokens), 0)::bigint AS tokens
					FROM named_reservations r WHERE r.name = n.name AND r.expires_at > `+serverNanos+`) h),
			fits AS (
				SELECT bool_and(($6::bigint = 0 OR cap_usd - usd - held_usd >= $6) AND ($7::bigint = 0 OR cap_tokens - tokens - held_tokens >= $7)) AS ok FROM st),
			swept AS (
				DELETE FROM named_reservations WHERE name = ANY($1::text[]) AND expires_at <= `+serverNanos+`),
			held AS (
				INSERT INTO named_reservations (name, usd_nanos, tokens, expires_at, owner, task_id)
				SELECT name, $6::bigint, $7::bigint, `+serverNanos+` + $8::bigint, $9::text, $10::text FROM st WHERE (SELECT ok FROM fits)
				RETURNING id)
			SELECT st.usd, st.tokens, st.held_usd, st.held_tokens, COALESCE((SELECT array_agg(id) FROM held), '{}') FROM st ORDER BY st.i`,
			nodes, starts, ends, capUSD, capTokens, int64(want.USD), want.Tokens, ttl.Nanoseconds(), h.Owner, h.TaskID)
		if err != nil {
			return err
		}
		i := 0
		var usd, tokens, heldUSD, heldTokens int64
		if _, err := pgx.ForEachRow(rows, []any{&usd, &tokens, &heldUSD, &heldTokens, &ids}, func() error {
			statuses[i].Spent.USD, statuses[i].Spent.Tokens = budget.USD(usd), tokens
			statuses[i].Held = budget.Amount{USD: budget.USD(heldUSD), Tokens: heldTokens}
			i++
			return nil
		}); err != nil {
			return err
		}
		if len(ids) == len(nodes) {
			return nil
		}
		ids = nil
		for _, st := range statuses {
			if err := budget.FitNamed(st.Name, want, st.Headroom()); err != nil {
				return err
			}
		}
		return errors.New("the hold fits in every budget but was not placed")
	})
	var ibe *budget.InsufficientBudgetError
	if errors.As(err, &ibe) || errors.Is(err, purser.ErrNotFound) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("reserve on named budget %s: %w", strings.Join(names, ", "), err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = s.pool.Exec(ctx, `DELETE FROM named_reservations WHERE id = ANY($1)`, ids)
	}, nil
}

// RunDraws returns the named budgets a run draws from and their
// ancestors, roots first, then by name.
func (s *Store) RunDraws(ctx context.Context, runID string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `WITH RECURSIVE up(name) AS (
			SELECT name FROM run_draws WHERE run_id = $1
			UNION SELECT b.parent FROM named_budgets b JOIN up ON b.name = up.name WHERE b.parent <> '')
		SELECT b.name, b.parent FROM named_budgets b WHERE b.name IN (SELECT name FROM up)`, runID)
	if err != nil {
		return nil, fmt.Errorf("budgets run %s draws from: %w", runID, err)
	}
	parents := map[string]string{}
	var n, p string
	if _, err := pgx.ForEachRow(rows, []any{&n, &p}, func() error { parents[n] = p; return nil }); err != nil {
		return nil, fmt.Errorf("budgets run %s draws from: %w", runID, err)
	}
	return storerow.RootsFirst(parents), nil
}
