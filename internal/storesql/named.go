package storesql

import (
	"context"
	"fmt"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/internal/storerow"
)

// BudgetParents is every named budget's parent, by name ("" for a root).
func BudgetParents(ctx context.Context, db DB) (map[string]string, error) {
	return parentsOf(ctx, db, "named budgets' parents", `SELECT name, parent FROM named_budgets`)
}

// parentsOf reads the rows (name, parent) of query into a map.
func parentsOf(ctx context.Context, db DB, what, query string, args ...any) (map[string]string, error) {
	pairs, err := Collect(ctx, db, what, func(r storerow.Scanner) ([2]string, error) {
		var p [2]string
		err := r.Scan(&p[0], &p[1])
		return p, err
	}, query, args...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		out[p[0]] = p[1]
	}
	return out, nil
}

// NamedBudget reads one named budget; a missing one matches
// purser.ErrNotFound.
func NamedBudget(ctx context.Context, db DB, name string) (purser.NamedBudget, error) {
	return storerow.NamedBudget(db.QueryRow(ctx, `SELECT `+storerow.NamedBudgetColumns+` FROM named_budgets WHERE name = $1`, name), name)
}

// NamedBudgetList is every named budget, by name.
func NamedBudgetList(ctx context.Context, db DB) ([]purser.NamedBudget, error) {
	out, err := Collect(ctx, db, "named budgets", storerow.ScanNamedBudget, `SELECT `+storerow.NamedBudgetColumns+` FROM named_budgets ORDER BY name`)
	if out == nil && err == nil {
		out = []purser.NamedBudget{}
	}
	return out, err
}

// BudgetRaises is a named budget's raises, oldest first.
func BudgetRaises(ctx context.Context, db DB, name string) ([]purser.NamedBudgetRaise, error) {
	return Collect(ctx, db, "raises of named budget "+name, storerow.Of(name, storerow.ScanBudgetRaise),
		`SELECT `+storerow.BudgetChangeColumns+` FROM named_budget_raises WHERE name = $1 ORDER BY id`, name)
}

// subtreeRuns names, for the budget $1, the runs whose spend it counts:
// those drawing from it or from any budget under it (UNION, not UNION ALL,
// so that even a loop ends).
const subtreeRuns = `WITH RECURSIVE sub(name) AS (
		SELECT CAST($1 AS TEXT) UNION SELECT b.name FROM named_budgets b JOIN sub ON b.parent = sub.name),
	runs(run_id) AS (SELECT DISTINCT run_id FROM run_draws WHERE name IN (SELECT name FROM sub))`

// SpendRows are the rows a named budget's spend is summed over, (run_id,
// at, usd_nanos, tokens): the ledger of the runs this database keeps, and
// the copies of other databases' runs' entries (named_usage), for a
// budgets database apart from its projects'. A run is in one or the other.
const SpendRows = `(SELECT run_id, at, usd_nanos, input_tokens + output_tokens AS tokens FROM usage
	UNION ALL SELECT run_id, at, usd_nanos, tokens FROM named_usage)`

// AppendNamedUsage copies ledger entries of runs another database keeps
// into named_usage, inside the caller's transaction db, each once per
// (run, key): a copy made again after a retry, a resume or a crash between
// the ledger's append and this one changes nothing. Each entry's RunID is
// its run as this database knows it (qualified by its project).
func AppendNamedUsage(ctx context.Context, db DB, entries []purser.LedgerEntry) error {
	for _, e := range entries {
		if _, err := db.Exec(ctx, `INSERT INTO named_usage (run_id, idem_key, usd_nanos, tokens, at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (run_id, idem_key) DO NOTHING`,
			e.RunID, e.Key, int64(e.Event.USD), e.Event.InputTokens+e.Event.OutputTokens, storerow.Nanos(e.At)); err != nil {
			return fmt.Errorf("copy usage %s of run %s to the budgets database: %w", e.Key, e.RunID, err)
		}
	}
	return nil
}

// NamedStatus is a named budget's spend and holds in the window holding
// now. clock is the SQL of the time the holds' expiry is judged by, in
// Unix nanoseconds: the server's clock on PostgreSQL, the host's (a
// literal, Nanos) on SQLite.
func NamedStatus(ctx context.Context, db DB, name string, now time.Time, clock string) (purser.NamedBudgetStatus, error) {
	b, err := NamedBudget(ctx, db, name)
	if err != nil {
		return purser.NamedBudgetStatus{}, err
	}
	st, err := b.StatusAt(now)
	if err != nil {
		return st, err
	}
	if err := storerow.ScanNamedSpend(db.QueryRow(ctx, subtreeRuns+`
		SELECT
			CAST(COALESCE((SELECT SUM(u.usd_nanos) FROM `+SpendRows+` u WHERE u.run_id IN (SELECT run_id FROM runs) AND u.at >= $2 AND u.at < $3), 0) AS BIGINT),
			CAST(COALESCE((SELECT SUM(u.tokens) FROM `+SpendRows+` u WHERE u.run_id IN (SELECT run_id FROM runs) AND u.at >= $2 AND u.at < $3), 0) AS BIGINT),
			CAST(COALESCE((SELECT SUM(usd_nanos) FROM named_reservations WHERE name = $1 AND expires_at > `+clock+`), 0) AS BIGINT),
			CAST(COALESCE((SELECT SUM(tokens) FROM named_reservations WHERE name = $1 AND expires_at > `+clock+`), 0) AS BIGINT)`,
		name, storerow.Nanos(st.WindowStart), storerow.Nanos(st.WindowEnd)), &st); err != nil {
		return st, err
	}
	if st.Runs, err = Collect(ctx, db, "runs drawing from "+name, storerow.ScanString, subtreeRuns+` SELECT run_id FROM runs ORDER BY run_id`, name); err != nil {
		return st, err
	}
	return st, nil
}

// RunDraws is the named budgets a run draws from and their ancestors,
// roots first, then by name.
func RunDraws(ctx context.Context, db DB, runID string) ([]string, error) {
	parents, err := parentsOf(ctx, db, "budgets run "+runID+" draws from", `WITH RECURSIVE up(name) AS (
			SELECT name FROM run_draws WHERE run_id = $1
			UNION SELECT b.parent FROM named_budgets b JOIN up ON b.name = up.name WHERE b.parent <> '')
		SELECT b.name, b.parent FROM named_budgets b WHERE b.name IN (SELECT name FROM up)`, runID)
	if err != nil {
		return nil, err
	}
	return storerow.RootsFirst(parents), nil
}
