package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// copied is a ledger entry of another database's run, as it is copied to
// the budgets database: tokens of input at a nano-dollar each.
func copied(run, key string, tokens int64, at time.Time) purser.LedgerEntry {
	return purser.LedgerEntry{Key: key, TaskID: "t", RunID: run, At: at,
		Event: budget.UsageEvent{InputTokens: tokens, USD: budget.USD(tokens), CostSource: budget.CostReported}}
}

// A budgets database counts, for a named budget and its ancestors, the
// usage other databases' runs copied to it (each run and key once, inside
// the window) beside its own ledger's, and admits holds against the sum,
// from any handle.
func testNamedUsageCountsCopiesOnce(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	nu, ok := s.(purser.NamedUsage)
	if !ok {
		t.Fatalf("%T keeps no copies of other databases' usage (purser.NamedUsage)", s)
	}
	for _, b := range []purser.NamedBudget{
		{Name: "org", Window: purser.WindowMonth, Budget: capped(budget.Dollars(1), 100_000)},
		{Name: "team", Parent: "org", Window: purser.WindowMonth, Budget: capped(budget.Dollars(1), 10_000)},
	} {
		if err := s.CreateBudget(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, run := range []string{"nightly@repo-a", "nightly@repo-b", "local"} {
		if err := s.DrawFrom(ctx, run, []string{"team"}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	lastMonth := now.AddDate(0, -1, -1)
	batches := [][]purser.LedgerEntry{
		{copied("nightly@repo-a", "c1/0", 3000, now)},
		// A retry, a resume, a crash healed: the same keys again, one new.
		{copied("nightly@repo-a", "c1/0", 3000, now), copied("nightly@repo-a", "c1/1", 1000, now)},
		// The same key in another project's run is another entry.
		{copied("nightly@repo-b", "c1/0", 2000, now), copied("nightly@repo-b", "old", 50_000, lastMonth)},
		// A run drawing from no budget counts for none.
		{copied("other@repo-a", "c9/0", 40_000, now)},
	}
	for _, b := range batches {
		if err := nu.AppendNamedUsage(ctx, b...); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendUsage(ctx, copied("local", "own", 500, now)); err != nil {
		t.Fatal(err)
	}
	if err := nu.AppendNamedUsage(ctx, copied("nightly@repo-a", "", 1, now)); !errors.Is(err, purser.ErrNoLedgerKey) {
		t.Fatalf("a copy without a key: %v, want ErrNoLedgerKey", err)
	}
	const spent = 3000 + 1000 + 2000 + 500
	other := open(t)
	for _, name := range []string{"team", "org"} {
		st, err := other.NamedBudgetStatus(ctx, name, now)
		if err != nil {
			t.Fatal(err)
		}
		if st.Spent.Tokens != spent || st.Spent.USD != spent {
			t.Errorf("%s spent %d tokens, %d nano-dollars; want %d of each (copies once each, its own ledger too)", name, st.Spent.Tokens, st.Spent.USD, spent)
		}
	}
	var ibe *budget.InsufficientBudgetError
	_, err := other.ReserveNamed(ctx, "team", purser.Holder{}, budget.Amount{Tokens: 10_000 - spent + 1}, now, time.Hour)
	if !errors.As(err, &ibe) || ibe.Name != "team" {
		t.Fatalf("a hold one token past what the copies leave: %v, want team's refusal", err)
	}
	release, err := other.ReserveNamed(ctx, "team", purser.Holder{}, budget.Amount{Tokens: 10_000 - spent}, now, time.Hour)
	if err != nil {
		t.Fatalf("a hold of exactly what is left: %v", err)
	}
	release()
}
