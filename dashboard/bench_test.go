package dashboard_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/dashboard"
	"github.com/purser-dev/purser/sqlite"
)

// BenchmarkLoad is one poll of a live page: the snapshot of a store of 20
// tasks with 50 calls and 500 ledger entries each.
func BenchmarkLoad(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "purser.db"))
	must(b, err)
	defer s.Close()
	at := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	cfg := budget.Config{Optimal: budget.Limits{Tokens: ptr(int64(100_000))}, Hard: budget.HardLimits{Tokens: ptr(int64(1_000_000)), MaxIterations: ptr(100)}}
	for i := range 20 {
		id := fmt.Sprintf("task-%02d", i)
		must(b, s.SaveTask(ctx, purser.TaskRecord{ID: id, RunID: "run-1", Budget: cfg, State: purser.StateRunning, CreatedAt: at, UpdatedAt: at}))
		var entries []purser.LedgerEntry
		for c := range 50 {
			callID := fmt.Sprintf("%s-c%d", id, c)
			must(b, s.SaveCall(ctx, purser.CallRecord{ID: callID, TaskID: id, Iteration: c/5 + 1, Kind: purser.CallMain, Attempt: 1, StartedAt: at, EndedAt: at, Outcome: purser.CallOK}))
			for k := range 10 {
				entries = append(entries, purser.LedgerEntry{Key: fmt.Sprintf("%s-%d", callID, k), TaskID: id, RunID: "run-1", CallID: callID, Iteration: c/5 + 1,
					Kind: purser.CallMain, At: at, Event: budget.UsageEvent{InputTokens: 100, OutputTokens: 10, USD: 1000, CostSource: budget.CostReported}})
			}
		}
		must(b, s.AppendUsage(ctx, entries...))
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := dashboard.Load(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
}
