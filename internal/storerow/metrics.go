package storerow

import (
	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// TaskTotalsColumns are the columns TaskTotals reads from usage_totals, in
// order: the task's id, then TotalsColumns.
const TaskTotalsColumns = `id, ` + TotalsColumns

// TaskTotals reads every row of rows (TaskTotalsColumns) into each task's
// running totals; the caller closes rows.
func TaskTotals(rows Rows) (map[string]budget.Totals, error) {
	out := map[string]budget.Totals{}
	for rows.Next() {
		var id string
		var t budget.Totals
		var usd, list int64
		if err := rows.Scan(&id, &usd, &t.Tokens, &t.Iterations, &t.ReportedEvents, &t.EstimatedEvents, &t.UnknownEvents, &list, &t.ListEvents); err != nil {
			return nil, err
		}
		t.USD, t.ListUSD = budget.USD(usd), budget.USD(list)
		out[id] = t
	}
	return out, rows.Err()
}

// ScanUsageBreakdown reads a task's ledger summed by cost source and token
// type: reported dollars, estimated dollars, unknown events, then input,
// output, cache-read, cache-write and reasoning tokens.
func ScanUsageBreakdown(r Scanner) (purser.UsageBreakdown, error) {
	var b purser.UsageBreakdown
	var reported, estimated int64
	if err := r.Scan(&reported, &estimated, &b.UnknownEvents,
		&b.InputTokens, &b.OutputTokens, &b.CacheReadTokens, &b.CacheWriteTokens, &b.ReasoningTokens); err != nil {
		return b, err
	}
	b.ReportedUSD, b.EstimatedUSD = budget.USD(reported), budget.USD(estimated)
	return b, nil
}

// LabelCounts reads rows of (label, label, count) into counts by label
// pair; the caller closes rows.
func LabelCounts(rows Rows) (map[purser.LabelPair]int64, error) {
	out := map[purser.LabelPair]int64{}
	for rows.Next() {
		var k purser.LabelPair
		var n int64
		if err := rows.Scan(&k[0], &k[1], &n); err != nil {
			return nil, err
		}
		out[k] += n
	}
	return out, rows.Err()
}
