// Package storerow is the Go side of the stores' rows, written once: what
// the columns of a row become (a task, a ledger entry, a call, …), the
// conversions of times, money and enums, and the column lists the stores'
// SELECTs read in that order. The SQL itself, its placeholders, locking and
// transactions stay in each store (sqlite, postgres): both tables hold the
// same columns, so both scan the same way. database/sql and pgx rows both
// satisfy Scanner; times are scanned through sql.NullInt64, which pgx reads
// as well.
package storerow

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// Scanner is one row of a result: *sql.Row, *sql.Rows, pgx.Row, pgx.Rows.
type Scanner interface {
	Scan(dest ...any) error
}

// Rows is a result set, as Collect reads it.
type Rows interface {
	Scanner
	Next() bool
	Err() error
}

// Collect scans every row of rows with scan; the caller closes rows.
func Collect[T any](rows Rows, scan func(Scanner) (T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Nanos is how a time is stored: Unix nanoseconds, 0 for the zero time.
func Nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// FromNanos reads a stored time back: NULL and 0 are the zero time.
func FromNanos(n sql.NullInt64) time.Time {
	if !n.Valid || n.Int64 == 0 {
		return time.Time{}
	}
	return time.Unix(0, n.Int64)
}

// ParseCostSource reads a stored cost source; one it does not know is
// budget.CostNone.
func ParseCostSource(s string) budget.CostSource {
	for _, c := range []budget.CostSource{budget.CostReported, budget.CostEstimated, budget.CostUnknown, budget.CostList} {
		if c.String() == s {
			return c
		}
	}
	return budget.CostNone
}

// RunBudgetJSON is how a run's budget is stored: "" for a run without one.
func RunBudgetJSON(run purser.Run) (string, error) {
	if run.Budget == nil {
		return "", nil
	}
	b, err := json.Marshal(run.Budget)
	return string(b), err
}

// RunColumns are the columns ScanRun reads, in order.
const RunColumns = `budget_json, elapsed_ns`

// ScanRun reads a run's RunColumns.
func ScanRun(r Scanner, id string) (purser.Run, error) {
	run := purser.Run{ID: id}
	var b sql.NullString
	var elapsed int64
	if err := r.Scan(&b, &elapsed); err != nil {
		return run, err
	}
	run.Elapsed = time.Duration(elapsed)
	if b.Valid && b.String != "" {
		run.Budget = new(budget.Config)
		if err := json.Unmarshal([]byte(b.String), run.Budget); err != nil {
			return run, fmt.Errorf("run %s: stored budget: %w", id, err)
		}
	}
	return run, nil
}

// TaskColumns are the columns of a task, in the order TaskValues gives
// them and ScanTask reads them.
const TaskColumns = `id, run_id, goal, workspace, file, budget_json, state, reason, elapsed_ns, owner, created_at, updated_at`

// TaskValues are t's TaskColumns as stored, created and updated now.
func TaskValues(t purser.TaskRecord) ([]any, error) {
	b, err := json.Marshal(t.Budget)
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	return []any{t.ID, t.RunID, t.Goal, t.Workspace, t.File, string(b), string(t.State), t.Reason, int64(t.Elapsed), t.Owner, now, now}, nil
}

// ScanTask reads a task's TaskColumns.
func ScanTask(r Scanner) (purser.TaskRecord, error) {
	var t purser.TaskRecord
	var budgetJSON, state string
	var elapsed int64
	var created, updated sql.NullInt64
	if err := r.Scan(&t.ID, &t.RunID, &t.Goal, &t.Workspace, &t.File, &budgetJSON, &state, &t.Reason, &elapsed, &t.Owner, &created, &updated); err != nil {
		return t, err
	}
	if err := json.Unmarshal([]byte(budgetJSON), &t.Budget); err != nil {
		return t, fmt.Errorf("task %s: stored budget: %w", t.ID, err)
	}
	t.State, t.Elapsed = purser.TaskState(state), time.Duration(elapsed)
	t.CreatedAt, t.UpdatedAt = FromNanos(created), FromNanos(updated)
	return t, nil
}

// ValidatorsJSON is how an iteration's validator results are stored: an
// empty list, never null.
func ValidatorsJSON(vs []purser.ValidatorResult) (string, error) {
	if vs == nil {
		vs = []purser.ValidatorResult{}
	}
	b, err := json.Marshal(vs)
	return string(b), err
}

// IterationColumns are the columns ScanIteration reads, in order.
const IterationColumns = `n, started_at, ended_at, outcome, validators_json`

// ScanIteration reads an iteration's IterationColumns.
func ScanIteration(r Scanner, taskID string) (purser.IterationRecord, error) {
	it := purser.IterationRecord{TaskID: taskID}
	var started, ended sql.NullInt64
	var vj string
	if err := r.Scan(&it.N, &started, &ended, &it.Outcome, &vj); err != nil {
		return it, err
	}
	it.StartedAt, it.EndedAt = FromNanos(started), FromNanos(ended)
	if err := json.Unmarshal([]byte(vj), &it.Validators); err != nil {
		return it, fmt.Errorf("iteration %d of task %s: %w", it.N, taskID, err)
	}
	return it, nil
}

// CallColumns are the columns ScanCall reads, in order.
const CallColumns = `id, iteration, kind, attempt, model, started_at, ended_at, outcome, error, context_tokens, reserved_usd, reserved_tokens, max_output_tokens, note, process, inner_retries, session, wire`

// ScanCall reads a call's CallColumns.
func ScanCall(r Scanner, taskID string) (purser.CallRecord, error) {
	c := purser.CallRecord{TaskID: taskID}
	var kind, outcome string
	var started, ended sql.NullInt64
	var rusd int64
	if err := r.Scan(&c.ID, &c.Iteration, &kind, &c.Attempt, &c.Model, &started, &ended, &outcome, &c.Error, &c.ContextTokens, &rusd,
		&c.Reserved.Tokens, &c.MaxOutputTokens, &c.Note, &c.Process, &c.InnerRetries, &c.Session, &c.Wire); err != nil {
		return c, err
	}
	c.Kind, c.Outcome, c.Reserved.USD = purser.CallKind(kind), purser.CallOutcome(outcome), budget.USD(rusd)
	c.StartedAt, c.EndedAt = FromNanos(started), FromNanos(ended)
	return c, nil
}

// LedgerColumns are the columns of a ledger entry ScanLedgerEntry reads,
// in order.
const LedgerColumns = `idem_key, run_id, call_id, iteration, kind, model, input_tokens, output_tokens, cache_read, cache_write, reasoning, usd_nanos, cost_source, elapsed_ns, iteration_end, at, price_source, settles_unknown, agent`

// ScanLedgerEntry reads a ledger entry's LedgerColumns.
func ScanLedgerEntry(r Scanner, taskID string) (purser.LedgerEntry, error) {
	e := purser.LedgerEntry{TaskID: taskID}
	var kind, source string
	var usd, elapsed int64
	var at sql.NullInt64
	ev := &e.Event
	if err := r.Scan(&e.Key, &e.RunID, &e.CallID, &e.Iteration, &kind, &ev.Model, &ev.InputTokens, &ev.OutputTokens, &ev.CacheReadTokens,
		&ev.CacheWriteTokens, &ev.ReasoningTokens, &usd, &source, &elapsed, &ev.IterationEnd, &at, &ev.PriceSource, &ev.SettlesUnknown, &ev.Agent); err != nil {
		return e, err
	}
	e.Kind, ev.USD, ev.CostSource, ev.Elapsed, e.At = purser.CallKind(kind), budget.USD(usd), ParseCostSource(source), time.Duration(elapsed), FromNanos(at)
	return e, nil
}

// ScanCallUsage reads what one call spent on one model for one agent:
// call_id, model, agent, iteration, kind, dollars, tokens, cached tokens,
// reported, estimated and unknown events, list dollars, list events.
func ScanCallUsage(r Scanner) (purser.CallUsage, error) {
	var c purser.CallUsage
	var kind string
	var usd, list int64
	if err := r.Scan(&c.CallID, &c.Model, &c.Agent, &c.Iteration, &kind, &usd, &c.Totals.Tokens, &c.CachedTokens,
		&c.Totals.ReportedEvents, &c.Totals.EstimatedEvents, &c.Totals.UnknownEvents, &list, &c.Totals.ListEvents); err != nil {
		return c, err
	}
	c.Kind, c.Totals.USD, c.Totals.ListUSD = purser.CallKind(kind), budget.USD(usd), budget.USD(list)
	return c, nil
}

// TotalsColumns are the columns of usage_totals ScanTotals reads, in
// order.
const TotalsColumns = `usd_nanos, tokens, iterations, reported, estimated, unknown, list_usd_nanos, list_events`

// ScanTotals reads running totals' TotalsColumns.
func ScanTotals(r Scanner) (budget.Totals, error) {
	var t budget.Totals
	var usd, list int64
	if err := r.Scan(&usd, &t.Tokens, &t.Iterations, &t.ReportedEvents, &t.EstimatedEvents, &t.UnknownEvents, &list, &t.ListEvents); err != nil {
		return t, err
	}
	t.USD, t.ListUSD = budget.USD(usd), budget.USD(list)
	return t, nil
}

// ScanPriceSource reads what one price source priced: price_source,
// cost_source, events, tokens, dollars.
func ScanPriceSource(r Scanner) (purser.PriceSourceUsage, error) {
	var p purser.PriceSourceUsage
	var source string
	var usd int64
	if err := r.Scan(&p.Source, &source, &p.Events, &p.Tokens, &usd); err != nil {
		return p, err
	}
	p.CostSource, p.USD = ParseCostSource(source), budget.USD(usd)
	return p, nil
}

// DegradeColumns are the columns ScanDegrade reads, in order.
const DegradeColumns = `iteration, call_kind, action, tier, metric, scope, detail, at`

// ScanDegrade reads a degrade action's DegradeColumns.
func ScanDegrade(r Scanner, taskID string) (purser.DegradeRecord, error) {
	d := purser.DegradeRecord{TaskID: taskID}
	var call, action, tier, metric, scope string
	var at sql.NullInt64
	if err := r.Scan(&d.Iteration, &call, &action, &tier, &metric, &scope, &d.Detail, &at); err != nil {
		return d, err
	}
	d.Call, d.Action, d.At = purser.CallKind(call), purser.DegradeAction(action), FromNanos(at)
	if err := d.Tier.UnmarshalText([]byte(tier)); err != nil {
		return d, fmt.Errorf("stored tier %q: %w", tier, err)
	}
	for _, m := range budget.Metrics {
		if m.String() == metric {
			d.Metric = m
		}
	}
	if scope == budget.ScopeRun.String() {
		d.Scope = budget.ScopeRun
	}
	return d, nil
}

// BudgetChangeJSON is how a budget change's two budgets are stored.
func BudgetChangeJSON(from, to budget.Config) (string, string, error) {
	f, err := json.Marshal(from)
	if err != nil {
		return "", "", err
	}
	t, err := json.Marshal(to)
	return string(f), string(t), err
}

// BudgetChangeColumns are the columns ScanBudgetChange reads, in order.
const BudgetChangeColumns = `at, by_whom, source, from_json, to_json`

// ScanBudgetChange reads a budget change's BudgetChangeColumns.
func ScanBudgetChange(r Scanner, taskID string) (purser.BudgetChange, error) {
	c := purser.BudgetChange{TaskID: taskID}
	var at sql.NullInt64
	var from, to string
	if err := r.Scan(&at, &c.By, &c.Source, &from, &to); err != nil {
		return c, err
	}
	c.At = FromNanos(at)
	if err := json.Unmarshal([]byte(from), &c.From); err != nil {
		return c, err
	}
	return c, json.Unmarshal([]byte(to), &c.To)
}

// OutboxColumns are the columns ScanOutbox reads, in order.
const OutboxColumns = `id, webhook, kind, task_id, body, created_at, attempts, state, owner`

// ScanOutbox reads a recorded alert's OutboxColumns.
func ScanOutbox(r Scanner) (purser.OutboxAlert, error) {
	var a purser.OutboxAlert
	var created int64
	var state string
	err := r.Scan(&a.ID, &a.Webhook, &a.Kind, &a.TaskID, &a.Body, &created, &a.Attempts, &state, &a.Owner)
	a.CreatedAt = time.Unix(0, created).UTC()
	a.State = purser.OutboxState(state)
	return a, err
}

// JobColumns are the columns ScanJob reads, in order.
const JobColumns = `task_id, run_id, task_file, state, worker, attempts, outcome`

// ScanJob reads a job's JobColumns.
func ScanJob(r Scanner) (purser.Job, error) {
	var j purser.Job
	var state string
	err := r.Scan(&j.TaskID, &j.RunID, &j.TaskFile, &state, &j.Worker, &j.Attempts, &j.Outcome)
	j.State = purser.JobState(state)
	return j, err
}

// Of binds a scanner of a task's rows to the task, for Collect.
func Of[T any](taskID string, scan func(Scanner, string) (T, error)) func(Scanner) (T, error) {
	return func(r Scanner) (T, error) { return scan(r, taskID) }
}

// CallInsertColumns are the columns of a call as saved, in the order
// CallValues gives them.
const CallInsertColumns = `id, task_id, iteration, kind, attempt, model, started_at, ended_at, outcome, error, context_tokens, reserved_usd, reserved_tokens, max_output_tokens, note, process, inner_retries, session, wire`

// CallValues are c's CallInsertColumns as stored.
func CallValues(c purser.CallRecord) []any {
	return []any{c.ID, c.TaskID, c.Iteration, string(c.Kind), c.Attempt, c.Model, Nanos(c.StartedAt), Nanos(c.EndedAt), string(c.Outcome), c.Error,
		c.ContextTokens, int64(c.Reserved.USD), c.Reserved.Tokens, c.MaxOutputTokens, c.Note, c.Process, c.InnerRetries, c.Session, c.Wire}
}

// LedgerInsertColumns are the columns of a ledger entry as appended, in
// the order LedgerValues gives them.
const LedgerInsertColumns = `idem_key, task_id, run_id, call_id, iteration, kind, model, input_tokens, output_tokens, cache_read, cache_write, reasoning, usd_nanos, cost_source, elapsed_ns, iteration_end, at, price_source, settles_unknown, agent`

// LedgerValues are e's LedgerInsertColumns as stored.
func LedgerValues(e purser.LedgerEntry) []any {
	ev := e.Event
	return []any{e.Key, e.TaskID, e.RunID, e.CallID, e.Iteration, string(e.Kind), ev.Model, ev.InputTokens, ev.OutputTokens,
		ev.CacheReadTokens, ev.CacheWriteTokens, ev.ReasoningTokens, int64(ev.USD), ev.CostSource.String(), int64(ev.Elapsed), ev.IterationEnd, Nanos(e.At),
		ev.PriceSource, ev.SettlesUnknown, ev.Agent}
}

// DegradeInsertColumns are the columns of a degrade action as saved, in
// the order DegradeValues gives them.
const DegradeInsertColumns = `task_id, ` + DegradeColumns

// DegradeValues are d's DegradeInsertColumns as stored.
func DegradeValues(d purser.DegradeRecord) []any {
	return []any{d.TaskID, d.Iteration, string(d.Call), string(d.Action), d.Tier.String(), d.Metric.String(), d.Scope.String(), d.Detail, Nanos(d.At)}
}

// AlertClaimColumns are the columns ScanAlertClaim reads, in order, but
// the last: whether the alert's lease is live, which each store judges by
// its clock.
const AlertClaimColumns = `seq, id, webhook, kind, task_id, body, created_at, attempts, owner`

// ScanAlertClaim reads a pending alert a claimer (owner) found: its row's
// seq and the alert as the claimer's. ok is false when the alert is held
// by a live process, the claimer included, which delivers it: its lease is
// live and its owner is the claimer or not gone.
func ScanAlertClaim(r Scanner, owner string, ownerGone func(string) bool) (seq int64, a purser.OutboxAlert, ok bool, err error) {
	var created int64
	var leased bool
	if err := r.Scan(&seq, &a.ID, &a.Webhook, &a.Kind, &a.TaskID, &a.Body, &created, &a.Attempts, &a.Owner, &leased); err != nil {
		return 0, a, false, err
	}
	if a.Owner != "" && leased && (a.Owner == owner || !ownerGone(a.Owner)) {
		return seq, a, false, nil
	}
	a.CreatedAt = time.Unix(0, created).UTC()
	a.State = purser.OutboxPending
	a.Owner = owner
	return seq, a, true, nil
}

// ScanJobClaim reads the job a worker was granted: task_id, run_id,
// task_file, attempts, and the job's state and worker before the grant
// (a lease that ran out names the worker that lost it).
func ScanJobClaim(r Scanner, worker string) (purser.Job, error) {
	j := purser.Job{Worker: worker, State: purser.JobLeased}
	var prevState, prevWorker string
	if err := r.Scan(&j.TaskID, &j.RunID, &j.TaskFile, &j.Attempts, &prevState, &prevWorker); err != nil {
		return purser.Job{}, err
	}
	if prevState == string(purser.JobLeased) && prevWorker != worker {
		j.LeaseLost = prevWorker
	}
	return j, nil
}
