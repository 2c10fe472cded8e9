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

// ReserveNamedAll holds want on every budget in names and each of their
// ancestors, or on none, atomically across every process and host. The
// transaction reads the budgets and takes the advisory lock of each tree's
// root in one statement (every hold in a tree takes its root's, so holds in
// one tree are decided one at a time), then checks every budget and
// inserts every hold in one guarded statement: two statements however deep
// the tree. The holds are recorded as h's.
func (s *Store) ReserveNamedAll(ctx context.Context, names []string, h purser.Holder, want budget.Amount, now time.Time, ttl time.Duration) (func(), error) {
	var ids []int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		nodes, byName, err := lockedLineage(ctx, tx, names)
		if err != nil {
			return err
		}
		statuses := make([]purser.NamedBudgetStatus, len(nodes))
		for i, n := range nodes {
			if statuses[i], err = byName[n].StatusAt(now); err != nil {
				return err
			}
		}
		if ids, err = holdOnAll(ctx, tx, nodes, statuses, h, want, ttl); err != nil || len(ids) == len(nodes) {
			return err
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

// lockedLineage reads the budgets in names and their ancestors and, in the
// same statement, takes the advisory lock of each of their trees' roots, in
// one order (by name, bytewise) in every transaction, so that two holds
// never wait on each other's roots in a cycle. It returns the budgets as
// storerow.TreeNodes orders them, and each by name.
func lockedLineage(ctx context.Context, tx pgx.Tx, names []string) ([]string, map[string]purser.NamedBudget, error) {
	rows, err := tx.Query(ctx, `WITH RECURSIVE up(name) AS (
			SELECT unnest($1::text[]) UNION SELECT b.parent FROM named_budgets b JOIN up ON b.name = up.name WHERE b.parent <> ''),
		got AS (SELECT `+storerow.NamedBudgetColumns+` FROM named_budgets WHERE name IN (SELECT name FROM up)),
		locked AS (SELECT count(*) AS n FROM (
			SELECT pg_advisory_xact_lock(hashtextextended('purser named budget ' || current_schema() || ' ' || name, 0))
			FROM (SELECT name FROM got WHERE parent = '' ORDER BY name COLLATE "C") roots) l)
		SELECT got.* FROM got, locked`, names)
	if err != nil {
		return nil, nil, err
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (purser.NamedBudget, error) { return storerow.ScanNamedBudget(r) })
	if err != nil {
		return nil, nil, err
	}
	byName, parents := map[string]purser.NamedBudget{}, map[string]string{}
	for _, b := range got {
		byName[b.Name], parents[b.Name] = b, b.Parent
	}
	nodes, err := storerow.TreeNodes(parents, names)
	return nodes, byName, err
}

// namedHold checks every budget and, only if the hold fits in all of them,
// places it on each; it returns what it read of each budget, so that a
// refusal names the one that is short.
const namedHold = `WITH n AS (
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[]) WITH ORDINALITY AS n(name, ws, we, cap_usd, cap_tokens, i)),
	st AS (
		SELECT n.name, n.i, n.cap_usd, n.cap_tokens, s.usd, s.tokens, h.usd AS held_usd, h.tokens AS held_tokens FROM n,
		LATERAL (
			WITH RECURSIVE sub(name) AS (SELECT n.name UNION SELECT b.name FROM named_budgets b JOIN sub ON b.parent = sub.name)
			SELECT COALESCE(SUM(u.usd_nanos), 0)::bigint AS usd, COALESCE(SUM(u.input_tokens + u.output_tokens), 0)::bigint AS tokens
			FROM usage u WHERE u.run_id IN (SELECT DISTINCT run_id FROM run_draws WHERE name IN (SELECT name FROM sub)) AND u.at >= n.ws AND u.at < n.we) s,
		LATERAL (
			SELECT COALESCE(SUM(usd_nanos), 0)::bigint AS usd, COALESCE(SUM(tokens), 0)::bigint AS tokens
			FROM named_reservations r WHERE r.name = n.name AND r.expires_at > ` + serverNanos + `) h),
	fits AS (
		SELECT bool_and(($6::bigint = 0 OR cap_usd - usd - held_usd >= $6) AND ($7::bigint = 0 OR cap_tokens - tokens - held_tokens >= $7)) AS ok FROM st),
	swept AS (
		DELETE FROM named_reservations WHERE name = ANY($1::text[]) AND expires_at <= ` + serverNanos + `),
	held AS (
		INSERT INTO named_reservations (name, usd_nanos, tokens, expires_at, owner, task_id)
		SELECT name, $6::bigint, $7::bigint, ` + serverNanos + ` + $8::bigint, $9::text, $10::text FROM st WHERE (SELECT ok FROM fits)
		RETURNING id)
	SELECT st.usd, st.tokens, st.held_usd, st.held_tokens, COALESCE((SELECT array_agg(id) FROM held), '{}') FROM st ORDER BY st.i`

// holdOnAll runs namedHold on nodes, whose windows and caps statuses hold,
// fills in each status's spend and holds, and returns the holds' ids: none
// when the hold did not fit in every budget.
func holdOnAll(ctx context.Context, tx pgx.Tx, nodes []string, statuses []purser.NamedBudgetStatus, h purser.Holder, want budget.Amount, ttl time.Duration) ([]int64, error) {
	starts, ends, capUSD, capTokens := make([]int64, len(nodes)), make([]int64, len(nodes)), make([]int64, len(nodes)), make([]int64, len(nodes))
	for i, st := range statuses {
		caps := st.Caps()
		starts[i], ends[i], capUSD[i], capTokens[i] = nanos(st.WindowStart), nanos(st.WindowEnd), int64(caps.USD), caps.Tokens
	}
	rows, err := tx.Query(ctx, namedHold, nodes, starts, ends, capUSD, capTokens, int64(want.USD), want.Tokens, ttl.Nanoseconds(), h.Owner, h.TaskID)
	if err != nil {
		return nil, err
	}
	i := 0
	var ids []int64
	var usd, tokens, heldUSD, heldTokens int64
	_, err = pgx.ForEachRow(rows, []any{&usd, &tokens, &heldUSD, &heldTokens, &ids}, func() error {
		statuses[i].Spent.USD, statuses[i].Spent.Tokens = budget.USD(usd), tokens
		statuses[i].Held = budget.Amount{USD: budget.USD(heldUSD), Tokens: heldTokens}
		i++
		return nil
	})
	return ids, err
}
