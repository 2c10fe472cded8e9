package storetest

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// RunMetrics runs the suite's purser.MetricsStore cases: a store that sums
// /metrics in the database must sum what its ledger, calls and degrade
// actions hold. newDatabase is as for Run.
func RunMetrics(t *testing.T, newDatabase func(t *testing.T) Opener) {
	t.Run("MetricsSumsMatchTheRecords", func(t *testing.T) {
		t.Parallel()
		testMetricsSums(t, newDatabase(t))
	})
	t.Run("ChangeMarkMovesOnEveryCommit", func(t *testing.T) {
		t.Parallel()
		testChangeMarkMovesOnEveryCommit(t, newDatabase(t))
	})
}

func testMetricsSums(t *testing.T, open Opener) {
	s := open(t)
	ms, ok := s.(purser.MetricsStore)
	if !ok {
		t.Fatalf("%T is not a purser.MetricsStore", s)
	}
	at := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	checkUsageSums(t, s, ms, at)
	checkCallCounts(t, s, ms, at)
	checkDegradeCounts(t, s, ms, at)
}

// checkUsageSums: the breakdown and totals per task are the ledger's, each
// key counted once.
func checkUsageSums(t *testing.T, s purser.Store, ms purser.MetricsStore, at time.Time) {
	ctx := t.Context()
	for _, id := range []string{"t1", "t2"} {
		if err := s.SaveTask(ctx, purser.TaskRecord{ID: id, RunID: "r", State: purser.StateRunning, CreatedAt: at, UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]purser.UsageBreakdown{}
	var batch []purser.LedgerEntry
	for i := range 200 {
		src := []budget.CostSource{budget.CostReported, budget.CostEstimated, budget.CostUnknown, budget.CostNone, budget.CostList}[i%5]
		task := []string{"t1", "t2"}[i%2]
		ev := budget.UsageEvent{InputTokens: int64(i), OutputTokens: 2, CacheReadTokens: int64(i % 3), CacheWriteTokens: int64(i % 7),
			ReasoningTokens: 1, USD: budget.USD(i * 1000), CostSource: src}
		batch = append(batch, purser.LedgerEntry{Key: fmt.Sprintf("k%d", i), TaskID: task, RunID: "r", CallID: "c", At: at, Event: ev})
		b := want[task]
		switch src {
		case budget.CostReported:
			b.ReportedUSD += ev.USD
		case budget.CostEstimated:
			b.EstimatedUSD += ev.USD
		case budget.CostUnknown:
			b.UnknownEvents++
		}
		b.InputTokens += ev.InputTokens
		b.OutputTokens += ev.OutputTokens
		b.CacheReadTokens += ev.CacheReadTokens
		b.CacheWriteTokens += ev.CacheWriteTokens
		b.ReasoningTokens += ev.ReasoningTokens
		want[task] = b
	}
	// Appended twice: the breakdown counts the ledger, each key once.
	for range 2 {
		if err := s.AppendUsage(ctx, batch...); err != nil {
			t.Fatal(err)
		}
	}
	for _, task := range []string{"t1", "t2", "never-ran"} {
		got, err := ms.UsageBreakdown(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		if got != want[task] {
			t.Errorf("task %s: breakdown %+v, want %+v", task, got, want[task])
		}
	}
	all, err := ms.TaskUsageTotals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range []string{"t1", "t2"} {
		one, err := s.UsageTotals(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		if all[task] != one {
			t.Errorf("task %s: TaskUsageTotals %+v, UsageTotals %+v", task, all[task], one)
		}
	}
}

// checkCallCounts: finished calls of known tasks, by kind and outcome.
func checkCallCounts(t *testing.T, s purser.Store, ms purser.MetricsStore, at time.Time) {
	ctx := t.Context()
	calls := []purser.CallRecord{
		{ID: "c1", TaskID: "t1", Kind: purser.CallMain, Outcome: purser.CallOK},
		{ID: "c2", TaskID: "t1", Kind: purser.CallMain, Outcome: purser.CallOK},
		{ID: "c3", TaskID: "t2", Kind: purser.CallMain, Outcome: purser.CallRefused},
		{ID: "c4", TaskID: "t2", Kind: purser.CallSelfReview, Outcome: purser.CallTransient},
		{ID: "c5", TaskID: "t2", Kind: purser.CallMain},                           // running: not counted
		{ID: "c6", TaskID: "gone", Kind: purser.CallMain, Outcome: purser.CallOK}, // no such task: not counted
	}
	for _, c := range calls {
		c.Iteration, c.Attempt, c.StartedAt = 1, 1, at
		if err := s.SaveCall(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	gotCalls, err := ms.CallCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := map[purser.LabelPair]int64{{"main", "ok"}: 2, {"main", "refused"}: 1, {"self_review", "transient_error"}: 1}
	if !maps.Equal(gotCalls, wantCalls) {
		t.Errorf("CallCounts = %v, want %v", gotCalls, wantCalls)
	}
}

// checkDegradeCounts: degrade actions of known tasks, by action and tier.
func checkDegradeCounts(t *testing.T, s purser.Store, ms purser.MetricsStore, at time.Time) {
	ctx := t.Context()
	for _, d := range []purser.DegradeRecord{
		{TaskID: "t1", Action: purser.ShrinkContext, Tier: budget.Warning},
		{TaskID: "t2", Action: purser.ShrinkContext, Tier: budget.Warning},
		{TaskID: "t2", Action: purser.DisableSelfReview, Tier: budget.Hard},
		{TaskID: "gone", Action: purser.DisableSelfReview, Tier: budget.Hard},
	} {
		d.Iteration, d.Call, d.Metric, d.At = 1, purser.CallMain, budget.Tokens, at
		if err := s.SaveDegrade(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	gotDegrades, err := ms.DegradeCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantDegrades := map[purser.LabelPair]int64{{"shrink_context", "warning"}: 2, {"disable_self_review", "hard"}: 1}
	if !maps.Equal(gotDegrades, wantDegrades) {
		t.Errorf("DegradeCounts = %v, want %v", gotDegrades, wantDegrades)
	}
}
