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
