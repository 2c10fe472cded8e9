// Package sqlite is Purser's embedded store: SQLite through a pure-Go driver
// (no cgo), in WAL mode, with versioned migrations.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/storerow"
	"github.com/purser-dev/purser/internal/storesql"
)

// Store is a purser.Store in one SQLite file.
type Store struct {
	db   *sql.DB
	path string // the database file, as opened
	// The ledger's statements, prepared once: appends are the hot path.
	insertUsage, addTotal, addTaskRunTotal, addCallTotal, addPriceTotal *sql.Stmt
	// appends gathers the appends that arrive while one commits, so that
	// they share the next transaction (a group commit).
	appends appendQueue
	mark    changeMark // ChangeMark's own connection
}

var _ purser.Store = (*Store)(nil)

// How times are stored, as in every store.
var nanos = storerow.Nanos

// OpenExisting opens the database at path, which must exist: commands that
// only read never create a database. A missing one is an error matching
// os.ErrNotExist.
func OpenExisting(ctx context.Context, path string) (*Store, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("open database %s: not a regular file", path)
	}
	return Open(ctx, path)
}

// Open opens (creating if needed) the database at path and migrates it. The
// directory and the file are made readable by their owner only: the ledger
// says what a user's agents did.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenWith(ctx, path, Options{})
}

// Durability says what a committed ledger entry survives.
type Durability string

const (
	// SurvivesCrash (synchronous=NORMAL with WAL, the default): a committed
	// entry survives Purser being killed, not a power cut or an OS crash,
	// which may lose the last commits (never corrupt the file).
	SurvivesCrash Durability = "normal"
	// SurvivesPowerLoss (synchronous=FULL): every commit is on disk before it
	// returns, at the cost of an fsync per commit.
	SurvivesPowerLoss Durability = "full"
)

// Options tunes how a database is opened.
type Options struct {
	Durability Durability // "" means SurvivesCrash
}

// OpenWith opens the database at path as Open does, with options.
func OpenWith(ctx context.Context, path string, opts Options) (*Store, error) {
	sync := "NORMAL"
	switch opts.Durability {
	case "", SurvivesCrash:
	case SurvivesPowerLoss:
		sync = "FULL"
	default:
		return nil, fmt.Errorf("open database %s: durability %q: want %q or %q", path, opts.Durability, SurvivesCrash, SurvivesPowerLoss)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create database directory: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	f.Close()
	// busy_timeout comes first: switching to WAL while another process holds
	// the database must wait, not fail.
	dsn, err := fileURI(path)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	dsn += "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(" + sync + ")&_pragma=foreign_keys(ON)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// One connection: SQLite has one writer anyway, and this keeps every
	// transaction short and ordered within the process.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, path: path}
	// A new database file is switched to WAL when first opened, which needs
	// an exclusive lock that SQLite does not wait for: another process
	// opening it at the same moment is told "database is locked". The mode
	// then persists in the file, so waiting a little and trying again is
	// enough.
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err = s.migrate(ctx)
		if err == nil || !isBusy(err) || time.Since(start) > 10*time.Second {
			break
		}
		time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	if err := s.prepare(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// fileURI turns a file path into an SQLite "file:" URI naming exactly that
// file. SQLite reads a '#' in a URI as the start of a fragment, a '?' as the
// start of the query (so does the driver, at the DSN's first '?') and
// decodes %HH, so a path such as .../C#/app would otherwise name .../C.
// The path is made absolute (so it cannot be read as an authority) and
// percent-encoded as a URL path.
func fileURI(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return "file://" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath(), nil
}

func isBusy(err error) bool {
	return strings.Contains(err.Error(), "SQLITE_BUSY") || strings.Contains(err.Error(), "database is locked")
}

// Close folds the write-ahead log into the database file and closes it, so
// that the file alone holds everything.
func (s *Store) Close() error {
	s.mark.mu.Lock()
	s.mark.close()
	s.mark.mu.Unlock()
	for _, st := range []*sql.Stmt{s.insertUsage, s.addTotal, s.addCallTotal, s.addPriceTotal} {
		st.Close()
	}
	_, cerr := s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	if err := s.db.Close(); err != nil {
		return err
	}
	return cerr
}

// SaveRun records a run, replacing its budget.
func (s *Store) SaveRun(ctx context.Context, run purser.Run) error {
	b, err := storerow.RunBudgetJSON(run)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO runs (id, budget_json, created_at) VALUES (?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET budget_json = excluded.budget_json`, run.ID, b, time.Now().UnixNano())
	if err != nil {
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
	if _, err := s.db.ExecContext(ctx, `INSERT INTO runs (id, budget_json, created_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		run.ID, b, time.Now().UnixNano()); err != nil {
		return run, fmt.Errorf("join run %s: %w", run.ID, err)
	}
	return s.Run(ctx, run.ID)
}

// Run returns a run.
func (s *Store) Run(ctx context.Context, id string) (purser.Run, error) {
	run, err := storerow.ScanRun(s.db.QueryRowContext(ctx, `SELECT `+storerow.RunColumns+` FROM runs WHERE id = ?`, id), id)
	if errors.Is(err, sql.ErrNoRows) {
		return run, fmt.Errorf("run %q: %w", id, purser.ErrNotFound)
	}
	return run, err
}

// SaveRunElapsed records the run's wall time, never lowering it.
func (s *Store) SaveRunElapsed(ctx context.Context, id string, elapsed time.Duration) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE runs SET elapsed_ns = MAX(elapsed_ns, ?) WHERE id = ?`, int64(elapsed), id); err != nil {
		return fmt.Errorf("save run %s elapsed: %w", id, err)
	}
	return nil
}

// ClaimTask records t RUNNING under t.Owner unless another live owner runs
// it, in one IMMEDIATE transaction: of two processes claiming at once, the
// second sees the first's claim.
func (s *Store) ClaimTask(ctx context.Context, t purser.TaskRecord, ownerGone func(owner string) bool) error {
	tx, err := s.db.BeginTx(ctx, nil) // _txlock=immediate: the write lock is taken now
	if err != nil {
		return fmt.Errorf("claim task %s: %w", t.ID, err)
	}
	defer tx.Rollback()
	var state, owner string
	err = tx.QueryRowContext(ctx, `SELECT state, owner FROM tasks WHERE id = ?`, t.ID).Scan(&state, &owner)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("claim task %s: %w", t.ID, err)
	default:
		if err := purser.CheckClaim(t, purser.TaskState(state), owner, ownerGone); err != nil {
			return err
		}
	}
	if err := saveTask(ctx, tx, t); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("claim task %s: %w", t.ID, err)
	}
	return nil
}

// SaveBudgetChange records a change of a task's budget made by the user.
func (s *Store) SaveBudgetChange(ctx context.Context, c purser.BudgetChange) error {
	from, to, err := storerow.BudgetChangeJSON(c.From, c.To)
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO budget_changes (task_id, at, by_whom, source, from_json, to_json) VALUES (?, ?, ?, ?, ?, ?)`,
		c.TaskID, storerow.Nanos(c.At), c.By, c.Source, from, to); err != nil {
		return fmt.Errorf("save budget change of task %s: %w", c.TaskID, err)
	}
	return nil
}

// BudgetChanges returns a task's budget changes, oldest first.
func (s *Store) BudgetChanges(ctx context.Context, taskID string) ([]purser.BudgetChange, error) {
	return query(ctx, s.db, "budget changes of task "+taskID, storerow.Of(taskID, storerow.ScanBudgetChange),
		`SELECT `+storerow.BudgetChangeColumns+` FROM budget_changes WHERE task_id = ? ORDER BY id`, taskID)
}

// SaveTask creates or updates a task.
func (s *Store) SaveTask(ctx context.Context, t purser.TaskRecord) error {
	return saveTask(ctx, s.db, t)
}

func saveTask(ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, t purser.TaskRecord) error {
	values, err := storerow.TaskValues(t)
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, `INSERT INTO tasks (`+storerow.TaskColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET run_id = excluded.run_id, goal = excluded.goal, workspace = excluded.workspace,
			file = excluded.file, budget_json = excluded.budget_json, state = excluded.state, reason = excluded.reason,
			elapsed_ns = excluded.elapsed_ns, owner = excluded.owner, updated_at = excluded.updated_at`, values...)
	if err != nil {
		return fmt.Errorf("save task %s: %w", t.ID, err)
	}
	return nil
}

// Task returns one task.
func (s *Store) Task(ctx context.Context, id string) (purser.TaskRecord, error) {
	t, err := storerow.ScanTask(s.db.QueryRowContext(ctx, `SELECT `+storerow.TaskColumns+` FROM tasks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, purser.TaskNotFoundError(id)
	}
	return t, err
}

// Tasks returns every task, oldest first.
func (s *Store) Tasks(ctx context.Context) ([]purser.TaskRecord, error) {
	return query(ctx, s.db, "tasks", storerow.ScanTask, `SELECT `+storerow.TaskColumns+` FROM tasks ORDER BY created_at, id`)
}

// query runs a query and scans each of its rows with scan, saying what it
// read when it fails.
func query[T any](ctx context.Context, db *sql.DB, what string, scan func(storerow.Scanner) (T, error), q string, args ...any) ([]T, error) {
	return storesql.Collect(ctx, sqlDB{db}, what, scan, q, args...)
}

func (s *Store) execOne(ctx context.Context, what, id, query string, args ...any) error {
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return purser.TaskNotFoundError(id)
	}
	return nil
}

// SetTaskState changes a task's state and says why.
func (s *Store) SetTaskState(ctx context.Context, id string, state purser.TaskState, reason string) error {
	return s.execOne(ctx, "set state of task", id, `UPDATE tasks SET state = ?, reason = ?, updated_at = ? WHERE id = ?`,
		string(state), reason, time.Now().UnixNano(), id)
}

// SaveElapsed records the wall time a task has run.
func (s *Store) SaveElapsed(ctx context.Context, id string, elapsed time.Duration) error {
	return s.execOne(ctx, "save elapsed time of task", id, `UPDATE tasks SET elapsed_ns = ?, updated_at = ? WHERE id = ?`,
		int64(elapsed), time.Now().UnixNano(), id)
}

// SaveIteration creates or updates an iteration.
func (s *Store) SaveIteration(ctx context.Context, it purser.IterationRecord) error {
	vs, err := storerow.ValidatorsJSON(it.Validators)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO iterations (task_id, n, started_at, ended_at, outcome, validators_json) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (task_id, n) DO UPDATE SET ended_at = excluded.ended_at, outcome = excluded.outcome, validators_json = excluded.validators_json`,
		it.TaskID, it.N, storerow.Nanos(it.StartedAt), storerow.Nanos(it.EndedAt), it.Outcome, vs)
	if err != nil {
		return fmt.Errorf("save iteration %d of task %s: %w", it.N, it.TaskID, err)
	}
	return nil
}

// Iterations returns a task's iterations in order.
func (s *Store) Iterations(ctx context.Context, taskID string) ([]purser.IterationRecord, error) {
	return query(ctx, s.db, "iterations of task "+taskID, storerow.Of(taskID, storerow.ScanIteration),
		`SELECT `+storerow.IterationColumns+` FROM iterations WHERE task_id = ? ORDER BY n`, taskID)
}

// SaveCall creates or updates a call.
func (s *Store) SaveCall(ctx context.Context, c purser.CallRecord) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO calls (`+storerow.CallInsertColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET ended_at = excluded.ended_at, outcome = excluded.outcome, error = excluded.error, note = excluded.note, process = excluded.process, inner_retries = excluded.inner_retries, session = excluded.session, wire = excluded.wire`,
		storerow.CallValues(c)...)
	if err != nil {
		return fmt.Errorf("save call %s: %w", c.ID, err)
	}
	return nil
}

// Calls returns a task's calls in the order they started.
func (s *Store) Calls(ctx context.Context, taskID string) ([]purser.CallRecord, error) {
	return query(ctx, s.db, "calls of task "+taskID, storerow.Of(taskID, storerow.ScanCall),
		`SELECT `+storerow.CallColumns+` FROM calls WHERE task_id = ? ORDER BY started_at, id`, taskID)
}

// The ledger's statements, prepared when the store opens.
const (
	insertUsageSQL = `INSERT INTO usage (` + storerow.LedgerInsertColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (idem_key) DO NOTHING`
	addTotalSQL = `INSERT INTO usage_totals (scope, id, usd_nanos, tokens, iterations, reported, estimated, unknown, list_usd_nanos, list_events)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT` + addTotalsUpdate
	// addTaskRunTotalSQL adds an event to its task's and its run's totals in
	// one statement: one step of the hot path fewer than two.
	addTaskRunTotalSQL = `INSERT INTO usage_totals (scope, id, usd_nanos, tokens, iterations, reported, estimated, unknown, list_usd_nanos, list_events)
		VALUES ('task', ?, ?, ?, ?, ?, ?, ?, ?, ?), ('run', ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT` + addTotalsUpdate
	addTotalsUpdate = ` (scope, id) DO UPDATE SET usd_nanos = usd_nanos + excluded.usd_nanos, tokens = tokens + excluded.tokens,
			iterations = iterations + excluded.iterations, reported = reported + excluded.reported,
			estimated = estimated + excluded.estimated, unknown = unknown + excluded.unknown,
			list_usd_nanos = list_usd_nanos + excluded.list_usd_nanos, list_events = list_events + excluded.list_events`
	addCallTotalSQL = `INSERT INTO call_totals (call_id, model, agent, task_id, iteration, kind, first_seq, usd_nanos, tokens, cached, reported, estimated, unknown, list_usd_nanos, list_events)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (call_id, model, agent) DO UPDATE SET usd_nanos = usd_nanos + excluded.usd_nanos, tokens = tokens + excluded.tokens,
			cached = cached + excluded.cached, reported = reported + excluded.reported,
			estimated = estimated + excluded.estimated, unknown = unknown + excluded.unknown,
			list_usd_nanos = list_usd_nanos + excluded.list_usd_nanos, list_events = list_events + excluded.list_events`
	addPriceTotalSQL = `INSERT INTO price_totals (task_id, price_source, cost_source, first_seq, events, tokens, usd_nanos)
		VALUES (?, ?, ?, ?, 1, ?, ?)
		ON CONFLICT (task_id, price_source, cost_source) DO UPDATE SET events = events + 1, tokens = tokens + excluded.tokens,
			usd_nanos = usd_nanos + excluded.usd_nanos`
)

// prepare prepares the ledger's statements once, for every append.
func (s *Store) prepare(ctx context.Context) error {
	var err error
	for _, st := range []struct {
		stmt  **sql.Stmt
		query string
	}{{&s.insertUsage, insertUsageSQL}, {&s.addTotal, addTotalSQL}, {&s.addTaskRunTotal, addTaskRunTotalSQL}, {&s.addCallTotal, addCallTotalSQL}, {&s.addPriceTotal, addPriceTotalSQL}} {
		if *st.stmt, err = s.db.PrepareContext(ctx, st.query); err != nil {
			return fmt.Errorf("prepare the ledger's statements: %w", err)
		}
	}
	return nil
}

// AppendUsage appends entries to the ledger in one transaction, each once
// per key, and keeps the task's and run's running totals with them. It
// returns once they are committed: an entry AppendUsage accepted survives
// Purser being killed. Appends that arrive while another commits — a call's
// events streamed from several goroutines, the tasks of a run — wait and
// are committed together in the next transaction (a group commit): each
// caller's entries are still all or nothing, and one caller's failure is
// never another's.
func (s *Store) AppendUsage(ctx context.Context, entries ...purser.LedgerEntry) error {
	if err := purser.CheckLedgerKeys(entries); err != nil {
		return fmt.Errorf("append usage: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("append usage: %w", err)
	}
	return s.appends.do(ctx, entries, s.appendTx)
}

// appendQueue is a group commit: one caller at a time commits everything
// queued, while later callers queue and wait; when it is done it hands the
// turn to the first caller still queued, so that no caller waits behind
// more than one batch besides its own.
type appendQueue struct {
	mu      sync.Mutex
	pending []*appendReq
	busy    bool // a caller is committing, or has been handed the turn
}

type appendReq struct {
	entries []purser.LedgerEntry
	done    chan error    // the outcome of the caller's entries
	turn    chan struct{} // the caller is to commit what is queued
}

func (q *appendQueue) do(ctx context.Context, entries []purser.LedgerEntry, commit func(context.Context, ...[]purser.LedgerEntry) error) error {
	req := &appendReq{entries: entries, done: make(chan error, 1), turn: make(chan struct{}, 1)}
	q.mu.Lock()
	q.pending = append(q.pending, req)
	if q.busy {
		q.mu.Unlock()
		// Committed by another caller, or our turn to commit: whatever our
		// context says meanwhile, the entries may be in the ledger, so wait
		// for the word.
		select {
		case err := <-req.done:
			return err
		case <-req.turn:
		}
		q.mu.Lock()
	}
	q.busy = true
	batch := q.pending // ours among them: queued, and none took it
	q.pending = nil
	q.mu.Unlock()

	// Bookkeeping for every caller in the batch: not cut by ours.
	ctx = context.WithoutCancel(ctx)
	all := make([][]purser.LedgerEntry, len(batch))
	for i, r := range batch {
		all[i] = r.entries
	}
	if err := commit(ctx, all...); err == nil || len(batch) == 1 {
		for _, r := range batch {
			r.done <- err
		}
	} else {
		// Each caller's entries alone, so that one's failure fails no other.
		for _, r := range batch {
			r.done <- commit(ctx, r.entries)
		}
	}

	q.mu.Lock()
	if len(q.pending) > 0 {
		q.pending[0].turn <- struct{}{}
	} else {
		q.busy = false
	}
	q.mu.Unlock()
	return <-req.done
}

// appendTx appends batches of entries in one transaction.
func (s *Store) appendTx(ctx context.Context, batches ...[]purser.LedgerEntry) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("append usage: %w", err)
	}
	defer tx.Rollback()
	insert := tx.StmtContext(ctx, s.insertUsage)
	total := tx.StmtContext(ctx, s.addTotal)
	taskRunTotal := tx.StmtContext(ctx, s.addTaskRunTotal)
	perCall := tx.StmtContext(ctx, s.addCallTotal)
	perPrice := tx.StmtContext(ctx, s.addPriceTotal)
	for _, entries := range batches {
		for _, e := range entries {
			ev := e.Event
			res, err := insert.ExecContext(ctx, storerow.LedgerValues(e)...)
			if err != nil {
				return fmt.Errorf("append usage %s: %w", e.Key, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue // already in the ledger: counted once
			}
			var t budget.Totals
			t.Add(ev)
			seq, _ := res.LastInsertId()
			if e.CallID != "" {
				if _, err := perCall.ExecContext(ctx, e.CallID, ev.Model, ev.Agent, e.TaskID, e.Iteration, string(e.Kind), seq, int64(t.USD), t.Tokens,
					ev.CacheReadTokens, t.ReportedEvents, t.EstimatedEvents, t.UnknownEvents, int64(t.ListUSD), t.ListEvents); err != nil {
					return fmt.Errorf("append usage %s: call totals: %w", e.Key, err)
				}
			}
			if ev.PriceSource != "" {
				if _, err := perPrice.ExecContext(ctx, e.TaskID, ev.PriceSource, ev.CostSource.String(), seq, ev.Tokens(), int64(pricedUSD(ev))); err != nil {
					return fmt.Errorf("append usage %s: price totals: %w", e.Key, err)
				}
			}
			sums := []any{int64(t.USD), t.Tokens, t.Iterations, t.ReportedEvents, t.EstimatedEvents, t.UnknownEvents, int64(t.ListUSD), t.ListEvents}
			if e.TaskID != "" && e.RunID != "" {
				args := append(append(append([]any{e.TaskID}, sums...), e.RunID), sums...)
				if _, err := taskRunTotal.ExecContext(ctx, args...); err != nil {
					return fmt.Errorf("append usage %s: totals: %w", e.Key, err)
				}
				continue
			}
			for _, scope := range [][2]string{{"task", e.TaskID}, {"run", e.RunID}} {
				if scope[1] == "" {
					continue
				}
				if _, err := total.ExecContext(ctx, append([]any{scope[0], scope[1]}, sums...)...); err != nil {
					return fmt.Errorf("append usage %s: totals: %w", e.Key, err)
				}
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("append usage: %w", err)
	}
	return nil
}

// pricedUSD is the dollars an event's price source stands for: none when
// its cost is unknown.
func pricedUSD(ev budget.UsageEvent) budget.USD {
	if ev.CostSource == budget.CostUnknown {
		return 0
	}
	return ev.USD
}

// Usage returns a task's ledger in order.
func (s *Store) Usage(ctx context.Context, taskID string) ([]purser.LedgerEntry, error) {
	return query(ctx, s.db, "ledger of task "+taskID, storerow.Of(taskID, storerow.ScanLedgerEntry),
		`SELECT `+storerow.LedgerColumns+` FROM usage WHERE task_id = ? ORDER BY seq`, taskID)
}

// CallUsage returns what each call of a task spent, per model and agent, from the
// running per-call totals: its cost grows with the calls, not the events.
func (s *Store) CallUsage(ctx context.Context, taskID string) ([]purser.CallUsage, error) {
	return query(ctx, s.db, "call usage of task "+taskID, storerow.ScanCallUsage,
		`SELECT call_id, model, agent, iteration, kind, usd_nanos, tokens, cached, reported, estimated, unknown, list_usd_nanos, list_events
		FROM call_totals WHERE task_id = ? ORDER BY first_seq`, taskID)
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
	t, err := storerow.ScanTotals(s.db.QueryRowContext(ctx, `SELECT `+storerow.TotalsColumns+` FROM usage_totals WHERE scope = ? AND id = ?`, scope, id))
	if errors.Is(err, sql.ErrNoRows) {
		return budget.Totals{}, nil
	}
	if err != nil {
		return t, fmt.Errorf("usage totals of %s %s: %w", scope, id, err)
	}
	return t, nil
}

// PriceSources returns what each price table and its rates priced for a
// task, from the running per-source totals.
func (s *Store) PriceSources(ctx context.Context, taskID string) ([]purser.PriceSourceUsage, error) {
	return query(ctx, s.db, "price sources of task "+taskID, storerow.ScanPriceSource,
		`SELECT price_source, cost_source, events, tokens, usd_nanos FROM price_totals WHERE task_id = ? ORDER BY first_seq`, taskID)
}

// SaveDegrade records a degrade action.
func (s *Store) SaveDegrade(ctx context.Context, d purser.DegradeRecord) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO degrade_events (`+storerow.DegradeInsertColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		storerow.DegradeValues(d)...)
	if err != nil {
		return fmt.Errorf("save degrade action of task %s: %w", d.TaskID, err)
	}
	return nil
}

// Degrades returns a task's degrade actions in order.
func (s *Store) Degrades(ctx context.Context, taskID string) ([]purser.DegradeRecord, error) {
	return query(ctx, s.db, "degrade actions of task "+taskID, storerow.Of(taskID, storerow.ScanDegrade),
		`SELECT `+storerow.DegradeColumns+` FROM degrade_events WHERE task_id = ? ORDER BY seq`, taskID)
}

// SaveArtifact stores (or replaces) a named artifact of a task.
func (s *Store) SaveArtifact(ctx context.Context, taskID, name string, content []byte) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO artifacts (task_id, name, content, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (task_id, name) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at`,
		taskID, name, content, time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("save artifact %s of task %s: %w", name, taskID, err)
	}
	return nil
}

// Artifact returns a named artifact of a task.
func (s *Store) Artifact(ctx context.Context, taskID, name string) ([]byte, error) {
	var b []byte
	err := s.db.QueryRowContext(ctx, `SELECT content FROM artifacts WHERE task_id = ? AND name = ?`, taskID, name).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("artifact %s of task %s: %w", name, taskID, purser.ErrNotFound)
	}
	return b, err
}

var _ purser.SharedRunBudget = (*Store)(nil)

func (s *Store) runHeadroom(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, runID string, caps budget.Amount) (budget.Amount, error) {
	var spentUSD, spentTokens, heldUSD, heldTokens int64
	if err := q.QueryRowContext(ctx, `SELECT COALESCE((SELECT usd_nanos FROM usage_totals WHERE scope = 'run' AND id = ?), 0),
			COALESCE((SELECT tokens FROM usage_totals WHERE scope = 'run' AND id = ?), 0),
			COALESCE((SELECT SUM(usd_nanos) FROM run_reservations WHERE run_id = ? AND expires_at > ?), 0),
			COALESCE((SELECT SUM(tokens) FROM run_reservations WHERE run_id = ? AND expires_at > ?), 0)`,
		runID, runID, runID, time.Now().UnixNano(), runID, time.Now().UnixNano()).Scan(&spentUSD, &spentTokens, &heldUSD, &heldTokens); err != nil {
		return budget.Amount{}, fmt.Errorf("run %s headroom: %w", runID, err)
	}
	return budget.Headroom(caps, budget.Amount{USD: budget.USD(spentUSD), Tokens: spentTokens},
		budget.Amount{USD: budget.USD(heldUSD), Tokens: heldTokens}), nil
}

// RunAvailable is what a hold on the run could get now.
func (s *Store) RunAvailable(ctx context.Context, runID string, caps budget.Amount) (budget.Amount, error) {
	return s.runHeadroom(ctx, s.db, runID, caps)
}

// ReserveRun holds want against a shared run budget, atomically across
// processes: the check and the hold are one IMMEDIATE transaction. The
// hold is recorded as h's.
func (s *Store) ReserveRun(ctx context.Context, runID string, h purser.Holder, caps, want budget.Amount, ttl time.Duration) (func(), error) {
	tx, err := s.db.BeginTx(ctx, nil) // _txlock=immediate: the write lock is taken now
	if err != nil {
		return nil, fmt.Errorf("reserve on run %s: %w", runID, err)
	}
	defer tx.Rollback()
	avail, err := s.runHeadroom(ctx, tx, runID, caps)
	if err != nil {
		return nil, err
	}
	if err := budget.Fit(budget.ScopeRun, want, avail); err != nil {
		return nil, err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO run_reservations (run_id, usd_nanos, tokens, expires_at, owner, task_id) VALUES (?, ?, ?, ?, ?, ?)`,
		runID, int64(want.USD), want.Tokens, time.Now().Add(ttl).UnixNano(), h.Owner, h.TaskID)
	if err != nil {
		return nil, fmt.Errorf("reserve on run %s: %w", runID, err)
	}
	id, _ := res.LastInsertId()
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("reserve on run %s: %w", runID, err)
	}
	return func() {
		_, _ = s.db.ExecContext(context.WithoutCancel(ctx), `DELETE FROM run_reservations WHERE id = ?`, id)
	}, nil
}
