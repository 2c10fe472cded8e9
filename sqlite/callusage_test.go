package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/report"
	"github.com/purser-dev/purser/sqlite"
)

// CallUsage is the ledger summed per call and model, each event counted
// once, whatever was appended twice.
func TestCallUsageIsTheLedgerSummed(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "p.db"))
	events := []purser.LedgerEntry{
		{Key: "a/1", TaskID: "t", CallID: "a", Iteration: 1, Kind: purser.CallMain, Event: budget.UsageEvent{Model: "m1", InputTokens: 100, CacheReadTokens: 40, OutputTokens: 10, USD: 5, CostSource: budget.CostReported}},
		{Key: "a/2", TaskID: "t", CallID: "a", Iteration: 1, Kind: purser.CallMain, Event: budget.UsageEvent{Model: "m1", InputTokens: 50, OutputTokens: 5, USD: 3, CostSource: budget.CostEstimated}},
		{Key: "a/3", TaskID: "t", CallID: "a", Iteration: 1, Kind: purser.CallMain, Event: budget.UsageEvent{Model: "m2", InputTokens: 7, CostSource: budget.CostUnknown}},
		{Key: "end/1", TaskID: "t", Iteration: 1, Event: budget.UsageEvent{IterationEnd: true}},
		{Key: "b/1", TaskID: "t", CallID: "b", Iteration: 2, Kind: purser.CallSelfReview, Event: budget.UsageEvent{Model: "m1", InputTokens: 1, OutputTokens: 1, USD: 1, CostSource: budget.CostReported}},
		{Key: "x/1", TaskID: "other", CallID: "x", Iteration: 1, Kind: purser.CallMain, Event: budget.UsageEvent{Model: "m1", InputTokens: 999}},
	}
	for range 2 { // the second append is a replay: ignored
		if err := s.AppendUsage(ctx, events...); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.CallUsage(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	want := []purser.CallUsage{
		{CallID: "a", Iteration: 1, Kind: purser.CallMain, Model: "m1", CachedTokens: 40, Totals: budget.Totals{USD: 8, Tokens: 165, ReportedEvents: 1, EstimatedEvents: 1}},
		{CallID: "a", Iteration: 1, Kind: purser.CallMain, Model: "m2", Totals: budget.Totals{Tokens: 7, UnknownEvents: 1}},
		{CallID: "b", Iteration: 2, Kind: purser.CallSelfReview, Model: "m1", Totals: budget.Totals{USD: 1, Tokens: 2, ReportedEvents: 1}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("CallUsage =\n%+v\nwant\n%+v", got, want)
	}
}

// BenchmarkStopReport loads what a stopped task's STATUS.md and BUDGET.md
// are written from, after 10⁴ and (without -short) 10⁶ ledger events over
// 200 calls: flat, since the reports read per-call running totals.
func BenchmarkStopReport(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			if n > 10_000 && testing.Short() {
				b.Skip("10⁶ events take a while to write; run without -short")
			}
			ctx := context.Background()
			s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "p.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			batch := make([]purser.LedgerEntry, 0, 5000)
			for i := range n {
				call := fmt.Sprintf("call-%d", i%200)
				batch = append(batch, purser.LedgerEntry{Key: fmt.Sprintf("%s/%d", call, i), TaskID: "t", CallID: call, Iteration: i%200/4 + 1, Kind: purser.CallMain,
					Event: budget.UsageEvent{Model: "m", InputTokens: 10, OutputTokens: 1, USD: 1, CostSource: budget.CostReported}})
				if len(batch) == cap(batch) || i == n-1 {
					if err := s.AppendUsage(ctx, batch...); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			b.ResetTimer()
			for b.Loop() {
				r, err := report.Load(ctx, s, "t")
				if err != nil {
					b.Fatal(err)
				}
				report.BudgetMD(r)
			}
		})
	}
}
