// Package postgres is Purser's store in PostgreSQL, for many processes on
// many machines sharing one ledger and one run budget: pgx through a
// connection pool, with embedded migrations applied once under an advisory
// lock. It keeps the same records as the SQLite store (the storetest suite
// holds both to the same behaviour). Money is BIGINT nano-dollars and times
// are BIGINT Unix nanoseconds, so both round-trip exactly.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/storerow"
	"github.com/purser-dev/purser/internal/storesql"
)

// Store is a purser.Store and purser.SharedRunBudget in a PostgreSQL
// database.
type Store struct {
	pool     *pgxpool.Pool
	where    string       // the URL without its password, for messages
	lineages lineageCache // the named budgets last held on (namedhold.go)
}

var (
	_ purser.Store           = (*Store)(nil)
	_ purser.SharedRunBudget = (*Store)(nil)
	_ purser.RunUsageWatcher = (*Store)(nil)
)

// IsURL says whether a database location is a PostgreSQL URL rather than a
// file path.
func IsURL(location string) bool {
	return strings.HasPrefix(location, "postgres://") || strings.HasPrefix(location, "postgresql://")
}

// Redact returns a PostgreSQL URL fit to show: its password, in the user
// part or in the query, is masked. A URL that does not parse is not shown.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a PostgreSQL URL that does not parse)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// passwordOf returns the password a URL carries, if any.
func passwordOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		return pw
	}
	return u.Query().Get("password")
}

// redactedError is an error whose message had the password taken out. It
// does not unwrap: the error it replaces said the password.
type redactedError struct{ msg string }

func (e *redactedError) Error() string { return e.msg }

// scrub wraps err with what failed and where, and makes sure the password
// of raw appears nowhere in the result.
func scrub(raw, what string, err error) error {
	wrapped := fmt.Errorf("%s %s: %w", what, Redact(raw), err)
	pw := passwordOf(raw)
	if pw == "" || !strings.Contains(wrapped.Error(), pw) {
		return wrapped
	}
	return &redactedError{msg: strings.ReplaceAll(wrapped.Error(), pw, "xxxxx")}
}

// Open connects to the database at rawURL (postgres://… or
// postgresql://…) and migrates it. Several processes opening one database
// at once migrate it once.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	s, err := connect(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		return nil, scrub(rawURL, "migrate", err)
	}
	return s, nil
}

// OpenExisting connects to a database Purser has already set up: commands
// that only read never create Purser's tables. A database without them is
// an error matching os.ErrNotExist.
func OpenExisting(ctx context.Context, rawURL string) (*Store, error) {
	s, err := connect(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	var present bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&present); err != nil {
		s.pool.Close()
		return nil, scrub(rawURL, "open database", err)
	}
	if !present {
		s.pool.Close()
		return nil, fmt.Errorf("open database %s: no Purser tables there: %w", s.where, os.ErrNotExist)
	}
	return s, nil
}

func connect(ctx context.Context, rawURL string) (*Store, error) {
	if !IsURL(rawURL) {
		return nil, fmt.Errorf("open database %s: want a postgres:// or postgresql:// URL", Redact(rawURL))
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, scrub(rawURL, "open database", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, scrub(rawURL, "open database", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, scrub(rawURL, "connect to database", err)
	}
	return &Store{pool: pool, where: Redact(rawURL)}, nil
}

// Close closes the pool's connections.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// inTx runs fn in a transaction, again from the start when PostgreSQL
// aborted it for a deadlock or a serialization failure (two appends that
// touch the same keys in opposite orders): the work is idempotent.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool, fn)
		var pgErr *pgconn.PgError
		if err == nil || attempt == 5 || !errors.As(err, &pgErr) || (pgErr.Code != "40P01" && pgErr.Code != "40001") {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 5 * time.Millisecond):
		}
	}
}

// How times are stored, as in every store.
var nanos = storerow.Nanos

// SaveRun records a run, replacing its budget (its clock is kept).
func (s *Store) SaveRun(ctx context.Context, run purser.Run) error {
	b, err := storerow.RunBudgetJSON(run)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO runs (id, budget_json, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET budget_json = excluded.budget_json`, run.ID, b, time.Now().UnixNano()); err != nil {
		return fmt.Errorf("save run %s: %w", run.ID, err)
	}
	return nil
}

// JoinRun creates a run if it does not exist and returns the run as stored.
func (s *Store) JoinRun(ctx context.Context, run purser.Run) (purser.Run, error) {
	b, err := storerow.RunBudgetJSON(run)
	if err != nil {
		return run, err
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO runs (id, budget_json, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING`,
		run.ID, b, time.Now().UnixNano()); err != nil {
		return run, fmt.Errorf("join run %s: %w", run.ID, err)
	}
	return s.Run(ctx, run.ID)
}

// Run returns a run.
func (s *Store) Run(ctx context.Context, id string) (purser.Run, error) {
	run, err := storerow.ScanRun(s.pool.QueryRow(ctx, `SELECT `+storerow.RunColumns+` FROM runs WHERE id = $1`, id), id)
	if errors.Is(err, pgx.ErrNoRows) {
		return run, fmt.Errorf("run %q: %w", id, purser.ErrNotFound)
	}
	if err != nil {
		return run, fmt.Errorf("run %s: %w", id, err)
	}
	return run, nil
}

// SaveRunElapsed records the run's wall time, never lowering it.
func (s *Store) SaveRunElapsed(ctx context.Context, id string, elapsed time.Duration) error {
	if _, err := s.pool.Exec(ctx, `UPDATE runs SET elapsed_ns = GREATEST(elapsed_ns, $1) WHERE id = $2`, int64(elapsed), id); err != nil {
		return fmt.Errorf("save run %s elapsed: %w", id, err)
	}
	return nil
}

// ClaimTask records t RUNNING under t.Owner unless another live owner runs
// it, in one transaction: a new task is inserted only if no one else
// inserted it first, and an existing one is locked (SELECT … FOR UPDATE)
// while its owner is judged, so of two claimers the second sees the first's
// claim.
func (s *Store) ClaimTask(ctx context.Context, t purser.TaskRecord, ownerGone func(owner string) bool) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		inserted, err := insertTask(ctx, tx, t)
		if err != nil || inserted {
			return err
		}
		var state, owner string
		if err := tx.QueryRow(ctx, `SELECT state, owner FROM tasks WHERE id = $1 FOR UPDATE`, t.ID).Scan(&state, &owner); err != nil {
			return err
		}
		if err := purser.CheckClaim(t, purser.TaskState(state), owner, ownerGone); err != nil {
			return err
		}
		return saveTask(ctx, tx, t)
	})
	var ce *purser.TaskClaimedError
	if err != nil && !errors.As(err, &ce) {
		return fmt.Errorf("claim task %s: %w", t.ID, err)
	}
	return err
}

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

const insertTaskSQL = `INSERT INTO tasks (` + storerow.TaskColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`

// insertTask inserts t if no task has its ID, saying whether it did.
func insertTask(ctx context.Context, db execer, t purser.TaskRecord) (bool, error) {
	args, err := storerow.TaskValues(t)
	if err != nil {
		return false, err
	}
	tag, err := db.Exec(ctx, insertTaskSQL+` ON CONFLICT (id) DO NOTHING`, args...)
	if err != nil {
		return false, fmt.Errorf("save task %s: %w", t.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

func saveTask(ctx context.Context, db execer, t purser.TaskRecord) error {
	args, err := storerow.TaskValues(t)
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, insertTaskSQL+`
		ON CONFLICT (id) DO UPDATE SET run_id = excluded.run_id, goal = excluded.goal, workspace = excluded.workspace,
			file = excluded.file, budget_json = excluded.budget_json, state = excluded.state, reason = excluded.reason,
			elapsed_ns = excluded.elapsed_ns, owner = excluded.owner, updated_at = excluded.updated_at`, args...); err != nil {
		return fmt.Errorf("save task %s: %w", t.ID, err)
	}
	return nil
}

// SaveTask creates or updates a task.
func (s *Store) SaveTask(ctx context.Context, t purser.TaskRecord) error {
	return saveTask(ctx, s.pool, t)
}

// Task returns one task.
func (s *Store) Task(ctx context.Context, id string) (purser.TaskRecord, error) {
	t, err := storerow.ScanTask(s.pool.QueryRow(ctx, `SELECT `+storerow.TaskColumns+` FROM tasks WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, purser.TaskNotFoundError(id)
	}
	if err != nil {
		return t, fmt.Errorf("task %s: %w", id, err)
	}
	return t, nil
}

// collect runs a query and scans each row with scan.
func collect[T any](ctx context.Context, s *Store, what string, scan func(storerow.Scanner) (T, error), query string, args ...any) ([]T, error) {
	return storesql.Collect(ctx, pgDB{s.pool}, what, scan, query, args...)
}

// Tasks returns every task, oldest first.
func (s *Store) Tasks(ctx context.Context) ([]purser.TaskRecord, error) {
	return collect(ctx, s, "tasks", storerow.ScanTask, `SELECT `+storerow.TaskColumns+` FROM tasks ORDER BY created_at, id`)
}

func (s *Store) execOne(ctx context.Context, what, id, query string, args ...any) error {
	tag, err := s.pool.Exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, id, err)
	}
	if tag.RowsAffected() == 0 {
		return purser.TaskNotFoundError(id)
	}
	return nil
}

// SetTaskState changes a task's state and says why.
func (s *Store) SetTaskState(ctx context.Context, id string, state purser.TaskState, reason string) error {
	return s.execOne(ctx, "set state of task", id, `UPDATE tasks SET state = $1, reason = $2, updated_at = $3 WHERE id = $4`,
		string(state), reason, time.Now().UnixNano(), id)
}

// SaveElapsed records the wall time a task has run.
func (s *Store) SaveElapsed(ctx context.Context, id string, elapsed time.Duration) error {
	return s.execOne(ctx, "save elapsed time of task", id, `UPDATE tasks SET elapsed_ns = $1, updated_at = $2 WHERE id = $3`,
		int64(elapsed), time.Now().UnixNano(), id)
}

// SaveIteration creates or updates an iteration.
func (s *Store) SaveIteration(ctx context.Context, it purser.IterationRecord) error {
	vs, err := storerow.ValidatorsJSON(it.Validators)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO iterations (task_id, n, started_at, ended_at, outcome, validators_json) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (task_id, n) DO UPDATE SET ended_at = excluded.ended_at, outcome = excluded.outcome, validators_json = excluded.validators_json`,
		it.TaskID, it.N, nanos(it.StartedAt), nanos(it.EndedAt), it.Outcome, vs); err != nil {
		return fmt.Errorf("save iteration %d of task %s: %w", it.N, it.TaskID, err)
	}
	return nil
}

// Iterations returns a task's iterations in order.
func (s *Store) Iterations(ctx context.Context, taskID string) ([]purser.IterationRecord, error) {
	return collect(ctx, s, "iterations of task "+taskID, storerow.Of(taskID, storerow.ScanIteration),
		`SELECT `+storerow.IterationColumns+` FROM iterations WHERE task_id = $1 ORDER BY n`, taskID)
}

// SaveCall creates or updates a call.
func (s *Store) SaveCall(ctx context.Context, c purser.CallRecord) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO calls (`+storerow.CallInsertColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
		ON CONFLICT (id) DO UPDATE SET ended_at = excluded.ended_at, outcome = excluded.outcome, error = excluded.error, note = excluded.note, process = excluded.process, inner_retries = excluded.inner_retries, session = excluded.session, wire = excluded.wire`,
		storerow.CallValues(c)...); err != nil {
		return fmt.Errorf("save call %s: %w", c.ID, err)
	}
	return nil
}

// Calls returns a task's calls in the order they started.
func (s *Store) Calls(ctx context.Context, taskID string) ([]purser.CallRecord, error) {
	return collect(ctx, s, "calls of task "+taskID, storerow.Of(taskID, storerow.ScanCall),
		`SELECT `+storerow.CallColumns+` FROM calls WHERE task_id = $1 ORDER BY started_at, id`, taskID)
}

type totalsKey struct{ scope, id string }

// AppendUsage appends entries to the ledger in one transaction, each once
// per key, and adds what was new to the task's and run's running totals in
// the same transaction.
func (s *Store) AppendUsage(ctx context.Context, entries ...purser.LedgerEntry) error {
	if err := purser.CheckLedgerKeys(entries); err != nil {
		return fmt.Errorf("append usage: %w", err)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		deltas := map[totalsKey]*budget.Totals{}
		for _, e := range entries {
			ev := e.Event
			tag, err := tx.Exec(ctx, `INSERT INTO usage (`+storerow.LedgerInsertColumns+`)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20) ON CONFLICT (idem_key) DO NOTHING`,
				storerow.LedgerValues(e)...)
			if err != nil {
				return fmt.Errorf("%s: %w", e.Key, err)
			}
			if tag.RowsAffected() == 0 {
				continue // already in the ledger: counted once
			}
			for _, k := range []totalsKey{{"task", e.TaskID}, {"run", e.RunID}} {
				if k.id == "" {
					continue
				}
				if deltas[k] == nil {
					deltas[k] = new(budget.Totals)
				}
				deltas[k].Add(ev)
			}
		}
		// The totals rows are updated in one order in every transaction,
		// so two appends never wait on each other's rows in a cycle.
		keys := make([]totalsKey, 0, len(deltas))
		for k := range deltas {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			return keys[i].scope < keys[j].scope || keys[i].scope == keys[j].scope && keys[i].id < keys[j].id
		})
		for _, k := range keys {
			t := deltas[k]
			if _, err := tx.Exec(ctx, `INSERT INTO usage_totals (scope, id, usd_nanos, tokens, iterations, reported, estimated, unknown, list_usd_nanos, list_events)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
				ON CONFLICT (scope, id) DO UPDATE SET usd_nanos = usage_totals.usd_nanos + excluded.usd_nanos, tokens = usage_totals.tokens + excluded.tokens,
					iterations = usage_totals.iterations + excluded.iterations, reported = usage_totals.reported + excluded.reported,
					estimated = usage_totals.estimated + excluded.estimated, unknown = usage_totals.unknown + excluded.unknown,
					list_usd_nanos = usage_totals.list_usd_nanos + excluded.list_usd_nanos, list_events = usage_totals.list_events + excluded.list_events`,
				k.scope, k.id, int64(t.USD), t.Tokens, t.Iterations, t.ReportedEvents, t.EstimatedEvents, t.UnknownEvents, int64(t.ListUSD), t.ListEvents); err != nil {
				return fmt.Errorf("totals of %s %s: %w", k.scope, k.id, err)
			}
			if k.scope == "run" {
				// Delivered on commit, to every process watching the run.
				if _, err := tx.Exec(ctx, `SELECT pg_notify('`+runUsageChannel+`', current_schema() || ' ' || $1)`, k.id); err != nil {
					return fmt.Errorf("notify run %s: %w", k.id, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("append usage: %w", err)
	}
	return nil
}

// Usage returns a task's ledger in order.
func (s *Store) Usage(ctx context.Context, taskID string) ([]purser.LedgerEntry, error) {
	return collect(ctx, s, "usage of task "+taskID, storerow.Of(taskID, storerow.ScanLedgerEntry),
		`SELECT `+storerow.LedgerColumns+` FROM usage WHERE task_id = $1 ORDER BY seq`, taskID)
}

// CallUsage returns what each call of a task spent, per model and agent, in the order
// the calls first reported usage, summed by the server over the task's
// ledger rows (by the usage_task index).
func (s *Store) CallUsage(ctx context.Context, taskID string) ([]purser.CallUsage, error) {
	return collect(ctx, s, "call usage of task "+taskID, storerow.ScanCallUsage, `SELECT call_id, model, agent, MIN(iteration), MIN(kind),
			COALESCE(SUM(CASE WHEN cost_source IN ('reported', 'estimated') THEN usd_nanos ELSE 0 END), 0)::BIGINT,
			COALESCE(SUM(input_tokens + output_tokens), 0)::BIGINT, COALESCE(SUM(cache_read), 0)::BIGINT,
			COUNT(*) FILTER (WHERE cost_source = 'reported'), COUNT(*) FILTER (WHERE cost_source = 'estimated'),
			COUNT(*) FILTER (WHERE cost_source = 'unknown') - COALESCE(SUM(settles_unknown), 0)::BIGINT,
			COALESCE(SUM(CASE WHEN cost_source = 'list' THEN usd_nanos ELSE 0 END), 0)::BIGINT, COUNT(*) FILTER (WHERE cost_source = 'list')
		FROM usage WHERE task_id = $1 AND call_id <> '' GROUP BY call_id, model, agent ORDER BY MIN(seq)`, taskID)
}

// UsageTotals returns a task's running totals.
func (s *Store) UsageTotals(ctx context.Context, taskID string) (budget.Totals, error) {
	return s.totals(ctx, "task", taskID)
}

// RunUsageTotals returns a run's running totals, over all its tasks.
func (s *Store) RunUsageTotals(ctx context.Context, runID string) (budget.Totals, error) {
	return s.totals(ctx, "run", runID)
}

func (s *Store) totals(ctx context.Context, scope, id string) (budget.Totals, error) {
	t, err := storerow.ScanTotals(s.pool.QueryRow(ctx, `SELECT `+storerow.TotalsColumns+` FROM usage_totals WHERE scope = $1 AND id = $2`, scope, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return budget.Totals{}, nil
	}
	if err != nil {
		return t, fmt.Errorf("usage totals of %s %s: %w", scope, id, err)
	}
	return t, nil
}

// PriceSources returns what each price table and its rates priced for a
// task, summed by the server over the task's ledger rows (by the usage_task
// index), as CallUsage is.
func (s *Store) PriceSources(ctx context.Context, taskID string) ([]purser.PriceSourceUsage, error) {
	return collect(ctx, s, "price sources of task "+taskID, storerow.ScanPriceSource,
		`SELECT price_source, cost_source, COUNT(*), COALESCE(SUM(input_tokens + output_tokens), 0)::BIGINT,
			COALESCE(SUM(CASE WHEN cost_source = 'unknown' THEN 0 ELSE usd_nanos END), 0)::BIGINT
		FROM usage WHERE task_id = $1 AND price_source <> '' GROUP BY price_source, cost_source ORDER BY MIN(seq)`, taskID)
}

// SaveDegrade records a degrade action.
func (s *Store) SaveDegrade(ctx context.Context, d purser.DegradeRecord) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO degrade_events (`+storerow.DegradeInsertColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		storerow.DegradeValues(d)...); err != nil {
		return fmt.Errorf("save degrade action of task %s: %w", d.TaskID, err)
	}
	return nil
}

// Degrades returns a task's degrade actions in order.
func (s *Store) Degrades(ctx context.Context, taskID string) ([]purser.DegradeRecord, error) {
	return collect(ctx, s, "degrade actions of task "+taskID, storerow.Of(taskID, storerow.ScanDegrade),
		`SELECT `+storerow.DegradeColumns+` FROM degrade_events WHERE task_id = $1 ORDER BY seq`, taskID)
}

// SaveBudgetChange records a change of a task's budget made by the user.
func (s *Store) SaveBudgetChange(ctx context.Context, c purser.BudgetChange) error {
	from, to, err := storerow.BudgetChangeJSON(c.From, c.To)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO budget_changes (task_id, at, by_whom, source, from_json, to_json) VALUES ($1, $2, $3, $4, $5, $6)`,
		c.TaskID, nanos(c.At), c.By, c.Source, from, to); err != nil {
		return fmt.Errorf("save budget change of task %s: %w", c.TaskID, err)
	}
	return nil
}

// BudgetChanges returns a task's budget changes, oldest first.
func (s *Store) BudgetChanges(ctx context.Context, taskID string) ([]purser.BudgetChange, error) {
	return collect(ctx, s, "budget changes of task "+taskID, storerow.Of(taskID, storerow.ScanBudgetChange),
		`SELECT `+storerow.BudgetChangeColumns+` FROM budget_changes WHERE task_id = $1 ORDER BY id`, taskID)
}

// SaveArtifact stores (or replaces) a named artifact of a task.
func (s *Store) SaveArtifact(ctx context.Context, taskID, name string, content []byte) error {
	if content == nil {
		content = []byte{}
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO artifacts (task_id, name, content, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (task_id, name) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at`,
		taskID, name, content, time.Now().UnixNano()); err != nil {
		return fmt.Errorf("save artifact %s of task %s: %w", name, taskID, err)
	}
	return nil
}

// Artifact returns a named artifact of a task.
func (s *Store) Artifact(ctx context.Context, taskID, name string) ([]byte, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT content FROM artifacts WHERE task_id = $1 AND name = $2`, taskID, name).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("artifact %s of task %s: %w", name, taskID, purser.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("artifact %s of task %s: %w", name, taskID, err)
	}
	return b, nil
}

// serverNanos is the server's clock in Unix nanoseconds (microsecond
// precision): reservations expire by one clock however the hosts' differ.
const serverNanos = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint * 1000`

type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
