package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/storerow"
	"github.com/purser-dev/purser/internal/storesql"
)

// ReserveNamedAll holds want on every budget in names and each of their
// ancestors, or on none, atomically across every process and host: every
// hold in a tree takes the advisory lock of its root first, so holds in one
// tree are decided one at a time, and then one guarded statement checks
// every budget and inserts every hold (namedHold). The budgets themselves
// (caps, windows, parents) are remembered from the last hold on names and
// checked unchanged by that statement, so a hold is one batch — the locks
// and the statement, in one implicit transaction and one round trip; when
// they changed, or on the first hold, a transaction reads them and takes
// the locks in one statement first. The holds are recorded as h's.
func (s *Store) ReserveNamedAll(ctx context.Context, names []string, h purser.Holder, want budget.Amount, now time.Time, ttl time.Duration) (func(), error) {
	key := strings.Join(names, "\x00")
	ids, err := s.reserveNamedBatch(ctx, key, h, want, now, ttl)
	for try := 0; errors.Is(err, errLineageChanged) && try < 5; try++ {
		ids, err = s.reserveNamedTx(ctx, key, names, h, want, now, ttl)
	}
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

// errLineageChanged says that the budgets a hold was decided on are not
// the ones stored now (or were never read): read them again.
var errLineageChanged = errors.New("the named budgets changed since they were read")

// reserveNamedBatch decides the hold on the budgets last read for key, in
// one batch: the roots' locks, then namedHold.
func (s *Store) reserveNamedBatch(ctx context.Context, key string, h purser.Holder, want budget.Amount, now time.Time, ttl time.Duration) ([]int64, error) {
	l, ok := s.lineages.get(key)
	if !ok {
		return nil, errLineageChanged
	}
	statuses, err := l.statusesAt(now)
	if err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended('purser named budget ' || current_schema() || ' ' || r, 0))
		FROM unnest($1::text[]) WITH ORDINALITY AS t(r, i) ORDER BY i`, l.roots)
	b.Queue(namedHold, holdArgs(l, statuses, h, want, ttl)...)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	ids, err := scanHold(rows, statuses)
	if err == nil {
		err = br.Close() // the implicit transaction commits
	}
	if errors.Is(err, errLineageChanged) {
		s.lineages.forget(key)
	}
	if err != nil {
		return nil, err
	}
	return decide(ids, statuses, want)
}

// reserveNamedTx reads the budgets of names and takes their roots' locks
// in one statement, remembers them for key, and decides the hold, in one
// transaction.
func (s *Store) reserveNamedTx(ctx context.Context, key string, names []string, h purser.Holder, want budget.Amount, now time.Time, ttl time.Duration) ([]int64, error) {
	var ids []int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		l, err := lockedLineage(ctx, tx, names)
		if err != nil {
			return err
		}
		s.lineages.put(key, l)
		statuses, err := l.statusesAt(now)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, namedHold, holdArgs(l, statuses, h, want, ttl)...)
		if err != nil {
			return err
		}
		if ids, err = scanHold(rows, statuses); err != nil {
			return err
		}
		ids, err = decide(ids, statuses, want)
		return err
	})
	return ids, err
}

// decide is the hold's outcome: its ids when it was placed on every budget,
// else the refusal of the budget nearest the root that is short.
func decide(ids []int64, statuses []purser.NamedBudgetStatus, want budget.Amount) ([]int64, error) {
	if len(ids) == len(statuses) {
		return ids, nil
	}
	for _, st := range statuses {
		if err := budget.FitNamed(st.Name, want, st.Headroom()); err != nil {
			return nil, err
		}
	}
	return nil, errors.New("the hold fits in every budget but was not placed")
}

// lineage is the budgets a hold on some names is placed on, as read: in
// storerow.TreeNodes' order, their trees' roots (by name, bytewise: the
// order their locks are taken in every transaction, so that two holds never
// wait on each other's roots in a cycle), and each row's version (xmin,
// which every UPDATE of the row changes).
type lineage struct {
	nodes, roots, versions []string
	byName                 map[string]purser.NamedBudget
}

func (l lineage) statusesAt(now time.Time) ([]purser.NamedBudgetStatus, error) {
	statuses := make([]purser.NamedBudgetStatus, len(l.nodes))
	for i, n := range l.nodes {
		var err error
		if statuses[i], err = l.byName[n].StatusAt(now); err != nil {
			return nil, err
		}
	}
	return statuses, nil
}

// lineageCache remembers the lineages read, by the names held on.
type lineageCache struct {
	mu sync.Mutex
	m  map[string]lineage
}

func (c *lineageCache) get(key string) (lineage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.m[key]
	return l, ok
}

func (c *lineageCache) put(key string, l lineage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= 1024 { // a bound: the sets of names a process draws from are few
		c.m = map[string]lineage{}
	}
	c.m[key] = l
}

func (c *lineageCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// lockedLineage reads the budgets in names and their ancestors and, in the
// same statement, takes the advisory lock of each of their trees' roots.
func lockedLineage(ctx context.Context, tx pgx.Tx, names []string) (lineage, error) {
	rows, err := tx.Query(ctx, `WITH RECURSIVE up(name) AS (
			SELECT unnest($1::text[]) UNION SELECT b.parent FROM named_budgets b JOIN up ON b.name = up.name WHERE b.parent <> ''),
		got AS (SELECT `+storerow.NamedBudgetColumns+`, xmin::text AS version FROM named_budgets WHERE name IN (SELECT name FROM up)),
		locked AS (SELECT count(*) AS n FROM (
			SELECT pg_advisory_xact_lock(hashtextextended('purser named budget ' || current_schema() || ' ' || name, 0))
			FROM (SELECT name FROM got WHERE parent = '' ORDER BY name COLLATE "C") roots) l)
		SELECT got.* FROM got, locked`, names)
	if err != nil {
		return lineage{}, err
	}
	l := lineage{byName: map[string]purser.NamedBudget{}}
	parents, versions := map[string]string{}, map[string]string{}
	var version string
	for rows.Next() {
		b, err := storerow.ScanNamedBudget(withExtra{rows, []any{&version}})
		if err != nil {
			rows.Close()
			return lineage{}, err
		}
		l.byName[b.Name], parents[b.Name], versions[b.Name] = b, b.Parent, version
	}
	if err := rows.Err(); err != nil {
		return lineage{}, err
	}
	if l.nodes, err = storerow.TreeNodes(parents, names); err != nil {
		return lineage{}, err
	}
	for _, n := range l.nodes {
		l.versions = append(l.versions, versions[n])
		if parents[n] == "" {
			l.roots = append(l.roots, n)
		}
	}
	slices.Sort(l.roots)
	return l, nil
}

// withExtra scans a row's leading columns into what its caller asks for
// and the rest into extra.
type withExtra struct {
	r     storerow.Scanner
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.r.Scan(append(dest, w.extra...)...) }

// namedHold checks every budget and, only if the hold fits in all of them
// and every budget's row is the version it was read at ($11), places it
// on each; it returns what it read of each budget, so that a refusal names
// the one that is short, and whether the versions matched.
const namedHold = `WITH n AS (
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[]) WITH ORDINALITY AS n(name, ws, we, cap_usd, cap_tokens, i)),
	same AS (
		SELECT count(*) = cardinality($1::text[]) AS ok FROM named_budgets b
		JOIN unnest($1::text[], $11::text[]) AS v(name, version) ON b.name = v.name AND b.xmin::text = v.version),
	st AS (
		SELECT n.name, n.i, n.cap_usd, n.cap_tokens, s.usd, s.tokens, h.usd AS held_usd, h.tokens AS held_tokens FROM n,
		LATERAL (
			WITH RECURSIVE sub(name) AS (SELECT n.name UNION SELECT b.name FROM named_budgets b JOIN sub ON b.parent = sub.name)
			SELECT COALESCE(SUM(u.usd_nanos), 0)::bigint AS usd, COALESCE(SUM(u.tokens), 0)::bigint AS tokens
			FROM ` + storesql.SpendRows + ` u WHERE u.run_id IN (SELECT DISTINCT run_id FROM run_draws WHERE name IN (SELECT name FROM sub)) AND u.at >= n.ws AND u.at < n.we) s,
		LATERAL (
			SELECT COALESCE(SUM(usd_nanos), 0)::bigint AS usd, COALESCE(SUM(tokens), 0)::bigint AS tokens
			FROM named_reservations r WHERE r.name = n.name AND r.expires_at > ` + serverNanos + `) h),
	fits AS (
		SELECT (SELECT ok FROM same) AND bool_and(($6::bigint = 0 OR cap_usd - usd - held_usd >= $6) AND ($7::bigint = 0 OR cap_tokens - tokens - held_tokens >= $7)) AS ok FROM st),
	swept AS (
		DELETE FROM named_reservations WHERE name = ANY($1::text[]) AND expires_at <= ` + serverNanos + `),
	held AS (
		INSERT INTO named_reservations (name, usd_nanos, tokens, expires_at, owner, task_id)
		SELECT name, $6::bigint, $7::bigint, ` + serverNanos + ` + $8::bigint, $9::text, $10::text FROM st WHERE (SELECT ok FROM fits)
		RETURNING id)
	SELECT st.usd, st.tokens, st.held_usd, st.held_tokens, COALESCE((SELECT array_agg(id) FROM held), '{}'), (SELECT ok FROM same)
	FROM st ORDER BY st.i`

// holdArgs are namedHold's arguments for a hold of want on l's budgets,
// whose windows and caps statuses hold.
func holdArgs(l lineage, statuses []purser.NamedBudgetStatus, h purser.Holder, want budget.Amount, ttl time.Duration) []any {
	n := len(l.nodes)
	starts, ends, capUSD, capTokens := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, st := range statuses {
		caps := st.Caps()
		starts[i], ends[i], capUSD[i], capTokens[i] = nanos(st.WindowStart), nanos(st.WindowEnd), int64(caps.USD), caps.Tokens
	}
	return []any{l.nodes, starts, ends, capUSD, capTokens, int64(want.USD), want.Tokens, ttl.Nanoseconds(), h.Owner, h.TaskID, l.versions}
}

// scanHold reads namedHold's rows into each budget's status and returns the
// holds' ids (none when the hold did not fit in every budget), or
// errLineageChanged.
func scanHold(rows pgx.Rows, statuses []purser.NamedBudgetStatus) ([]int64, error) {
	i := 0
	var ids []int64
	var usd, tokens, heldUSD, heldTokens int64
	same := true
	_, err := pgx.ForEachRow(rows, []any{&usd, &tokens, &heldUSD, &heldTokens, &ids, &same}, func() error {
		statuses[i].Spent.USD, statuses[i].Spent.Tokens = budget.USD(usd), tokens
		statuses[i].Held = budget.Amount{USD: budget.USD(heldUSD), Tokens: heldTokens}
		i++
		return nil
	})
	if err == nil && !same {
		err = errLineageChanged
	}
	return ids, err
}
