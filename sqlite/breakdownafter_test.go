package sqlite_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/sqlite"
)

// Summing a task's ledger in pieces, each after the last row the one
// before read, gives what summing it whole gives, with no row twice.
func TestUsageBreakdownAfterAddsUpToTheWhole(t *testing.T) {
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC)
	var sum purser.UsageBreakdown
	var seq int64
	for round := range 4 {
		var entries []purser.LedgerEntry
		for i := range 5 {
			src := []budget.CostSource{budget.CostReported, budget.CostEstimated, budget.CostUnknown}[(round+i)%3]
			for _, task := range []string{"t", "other"} {
				entries = append(entries, purser.LedgerEntry{Key: fmt.Sprintf("%s-%d-%d", task, round, i), TaskID: task, RunID: "r", At: at,
					Event: budget.UsageEvent{InputTokens: int64(10 + i), OutputTokens: 3, CacheReadTokens: 2, USD: budget.USD(100 * (i + 1)), CostSource: src}})
			}
		}
		if err := s.AppendUsage(ctx, entries...); err != nil {
			t.Fatal(err)
		}
		more, last, err := s.UsageBreakdownAfter(ctx, "t", seq)
		if err != nil {
			t.Fatal(err)
		}
		if last <= seq {
			t.Fatalf("round %d: last row %d, not after %d", round, last, seq)
		}
		sum, seq = sum.Plus(more), last
		whole, err := s.UsageBreakdown(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		if sum != whole {
			t.Fatalf("round %d: pieces sum to %+v, the whole is %+v", round, sum, whole)
		}
	}
	none, last, err := s.UsageBreakdownAfter(ctx, "t", seq)
	if err != nil || none != (purser.UsageBreakdown{}) || last != seq {
		t.Fatalf("with nothing after row %d: %+v, last %d (%v)", seq, none, last, err)
	}
}
