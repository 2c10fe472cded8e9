package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// An estimate's provenance is kept in the ledger, and a reported cost that
// settles a call's unknown events leaves the totals without unknowns.
func TestLedgerKeepsPriceSourceAndSettlement(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "p.db"))
	entries := []purser.LedgerEntry{
		{Key: "c/1", TaskID: "t", RunID: "r", CallID: "c", Event: budget.UsageEvent{InputTokens: 10, CostSource: budget.CostUnknown, PriceSource: `no price for "x"`}},
		{Key: "c/2", TaskID: "t", RunID: "r", CallID: "c", Event: budget.UsageEvent{InputTokens: 5, CostSource: budget.CostUnknown}},
		{Key: "c/3", TaskID: "t", RunID: "r", CallID: "c", Event: budget.UsageEvent{USD: 700, CostSource: budget.CostReported, SettlesUnknown: 2}},
	}
	for _, e := range entries {
		if err := s.AppendUsage(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Usage(ctx, "t")
	if err != nil || len(got) != 3 {
		t.Fatalf("usage %v, %v", got, err)
	}
	if got[0].Event.PriceSource != `no price for "x"` || got[2].Event.SettlesUnknown != 2 {
		t.Fatalf("read back %+v / %+v", got[0].Event, got[2].Event)
	}
	tot, err := s.UsageTotals(ctx, "t")
	if err != nil || tot.UnknownEvents != 0 || tot.USD != 700 || tot.USDSource() != budget.SourceReported {
		t.Fatalf("task totals %+v (%s), %v", tot, tot.USDSource(), err)
	}
	run, err := s.RunUsageTotals(ctx, "r")
	if err != nil || run.UnknownEvents != 0 || run.USDSource() != budget.SourceReported {
		t.Fatalf("run totals %+v, %v", run, err)
	}
}
