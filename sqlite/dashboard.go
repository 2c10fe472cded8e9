package sqlite

import (
	"context"
	"fmt"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/storerow"
)

var _ purser.MetricsStore = (*Store)(nil)

// TaskUsageTotals returns every task's running totals in one read.
func (s *Store) TaskUsageTotals(ctx context.Context) (map[string]budget.Totals, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+storerow.TaskTotalsColumns+` FROM usage_totals WHERE scope = 'task'`)
	if err != nil {
		return nil, fmt.Errorf("usage totals of every task: %w", err)
	}
	defer rows.Close()
	out, err := storerow.TaskTotals(rows)
	if err != nil {
		return nil, fmt.Errorf("usage totals of every task: %w", err)
	}
	return out, nil
}

// breakdownSums are the sums of UsageBreakdown, in storerow.ScanUsageBreakdown's order.
const breakdownSums = `
			COALESCE(SUM(CASE WHEN cost_source = 'reported' THEN usd_nanos ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN cost_source = 'estimated' THEN usd_nanos ELSE 0 END), 0),
			COALESCE(SUM(cost_source = 'unknown'), 0),
			COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cache_read), 0),
			COALESCE(SUM(cache_write), 0), COALESCE(SUM(reasoning), 0)`

// UsageBreakdown sums a task's ledger rows (by the usage_task index) by
// cost source and token type.
func (s *Store) UsageBreakdown(ctx context.Context, taskID string) (purser.UsageBreakdown, error) {
	b, err := storerow.ScanUsageBreakdown(s.db.QueryRowContext(ctx, `SELECT `+breakdownSums+` FROM usage WHERE task_id = ?`, taskID))
	if err != nil {
		return b, fmt.Errorf("usage breakdown of task %s: %w", taskID, err)
	}
	return b, nil
}

var _ purser.BreakdownAfterStore = (*Store)(nil)

// UsageBreakdownAfter sums the task's rows after afterSeq (by the
// usage_task index, which is on (task_id, seq)). SQLite commits one writer
// at a time and numbers a row as it is inserted, within its transaction,
// so rows are numbered in commit order: none can appear later below a
// number already read.
func (s *Store) UsageBreakdownAfter(ctx context.Context, taskID string, afterSeq int64) (purser.UsageBreakdown, int64, error) {
	last := afterSeq
	row := s.db.QueryRowContext(ctx, `SELECT `+breakdownSums+`, COALESCE(MAX(seq), ?) FROM usage WHERE task_id = ? AND seq > ?`, afterSeq, taskID, afterSeq)
	b, err := storerow.ScanUsageBreakdown(scanAlso{row, &last})
	if err != nil {
		return b, afterSeq, fmt.Errorf("usage breakdown of task %s after row %d: %w", taskID, afterSeq, err)
	}
	return b, last, nil
}

// scanAlso scans one more column, after the ones asked for, into extra.
type scanAlso struct {
	row   storerow.Scanner
	extra any
}

func (s scanAlso) Scan(dest ...any) error { return s.row.Scan(append(dest, s.extra)...) }

// CallCounts counts the finished calls of every stored task by kind and
// outcome.
func (s *Store) CallCounts(ctx context.Context) (map[purser.LabelPair]int64, error) {
	return s.labelCounts(ctx, "calls by kind and outcome", `SELECT kind, outcome, COUNT(*) FROM calls
		WHERE outcome != '' AND task_id IN (SELECT id FROM tasks) GROUP BY kind, outcome`)
}

// DegradeCounts counts the degrade actions of every stored task by action
// and tier.
func (s *Store) DegradeCounts(ctx context.Context) (map[purser.LabelPair]int64, error) {
	return s.labelCounts(ctx, "degrade actions by action and tier", `SELECT action, tier, COUNT(*) FROM degrade_events
		WHERE task_id IN (SELECT id FROM tasks) GROUP BY action, tier`)
}

func (s *Store) labelCounts(ctx context.Context, what, query string) (map[purser.LabelPair]int64, error) {
	rows, err := s.db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	out, err := storerow.LabelCounts(rows)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
