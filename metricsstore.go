package purser

import (
	"context"

	"github.com/purser-dev/purser/budget"
)

// UsageBreakdown is a task's ledger summed by where each dollar figure came
// from and by token type: what Prometheus is told was spent.
type UsageBreakdown struct {
	ReportedUSD  budget.USD
	EstimatedUSD budget.USD
	// UnknownEvents counts events that spent money nobody knows how much of.
	UnknownEvents    int64
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	ReasoningTokens  int64
}

// LabelPair is a pair of label values a count is kept under: a call's kind
// and outcome, a degrade action and its tier.
type LabelPair [2]string

// MetricsStore is a store that sums in the database what the dashboard's
// /metrics reports, so that a scrape reads a row per task or per label
// pair, never a row per ledger event, call or degrade action. The
// dashboard reads a store without it the long way.
type MetricsStore interface {
	// TaskUsageTotals returns every task's running totals (UsageTotals), by
	// task id, in one read; a task with no usage may be missing.
	TaskUsageTotals(ctx context.Context) (map[string]budget.Totals, error)
	// UsageBreakdown sums a task's ledger by cost source and token type.
	// The dashboard calls it only when the task's running totals moved.
	UsageBreakdown(ctx context.Context, taskID string) (UsageBreakdown, error)
	// CallCounts counts every task's finished calls (Outcome set) by kind
	// and outcome.
	CallCounts(ctx context.Context) (map[LabelPair]int64, error)
	// DegradeCounts counts every task's degrade actions by action and tier
	// (budget.Tier.String()).
	DegradeCounts(ctx context.Context) (map[LabelPair]int64, error)
}

// Plus is the breakdown of b's events and o's together.
func (b UsageBreakdown) Plus(o UsageBreakdown) UsageBreakdown {
	return UsageBreakdown{ReportedUSD: b.ReportedUSD + o.ReportedUSD, EstimatedUSD: b.EstimatedUSD + o.EstimatedUSD,
		UnknownEvents: b.UnknownEvents + o.UnknownEvents, InputTokens: b.InputTokens + o.InputTokens,
		OutputTokens: b.OutputTokens + o.OutputTokens, CacheReadTokens: b.CacheReadTokens + o.CacheReadTokens,
		CacheWriteTokens: b.CacheWriteTokens + o.CacheWriteTokens, ReasoningTokens: b.ReasoningTokens + o.ReasoningTokens}
}

// BreakdownAfterStore is a MetricsStore whose ledger rows are numbered in
// the order they were committed, so that a task's breakdown is kept up to
// date by summing only the rows after the last one read: a scrape after a
// commit then reads what was appended, not the task's whole ledger.
// SQLite numbers rows so (one writer at a time); PostgreSQL numbers them
// as they are inserted, and a row inserted earlier may commit after a
// later one was read, so it does not offer this.
type BreakdownAfterStore interface {
	// UsageBreakdownAfter sums the task's ledger rows numbered after
	// afterSeq, and returns the last number summed (afterSeq when none).
	UsageBreakdownAfter(ctx context.Context, taskID string, afterSeq int64) (UsageBreakdown, int64, error)
}
