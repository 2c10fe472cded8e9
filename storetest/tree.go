package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// makeTree creates org (month) → team-a, team-b (week) → repo-a1, repo-b1
// (day) → run-a, run-b (day; the run level), each with tokens capped at
// caps[level] and no dollar cap that binds.
func makeTree(t *testing.T, s Store, caps [4]int64) {
	t.Helper()
	ctx := t.Context()
	for _, b := range []purser.NamedBudget{
		{Name: "org", Window: purser.WindowMonth, Budget: capped(budget.Dollars(1000), caps[0])},
		{Name: "team-a", Parent: "org", Window: purser.WindowWeek, Budget: capped(budget.Dollars(1000), caps[1])},
		{Name: "team-b", Parent: "org", Window: purser.WindowWeek, Budget: capped(budget.Dollars(1000), caps[1])},
		{Name: "repo-a1", Parent: "team-a", Window: purser.WindowDay, Budget: capped(budget.Dollars(1000), caps[2])},
		{Name: "repo-b1", Parent: "team-b", Window: purser.WindowDay, Budget: capped(budget.Dollars(1000), caps[2])},
		{Name: "run-a", Parent: "repo-a1", Window: purser.WindowDay, Budget: capped(budget.Dollars(1000), caps[3])},
		{Name: "run-b", Parent: "repo-b1", Window: purser.WindowDay, Budget: capped(budget.Dollars(1000), caps[3])},
	} {
		if err := s.CreateBudget(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
}

// A budget's parent must exist and may never be the budget itself or one
// under it: the loop is refused, naming it. A run drawing from a leaf draws
// from its every ancestor, and each level counts the spend of the runs
// under it in its own window.
func testNamedBudgetTree(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	makeTree(t, s, [4]int64{1_000_000, 1_000_000, 1_000_000, 1_000_000})

	if err := s.CreateBudget(ctx, purser.NamedBudget{Name: "orphan", Parent: "nope", Window: purser.WindowDay, Budget: capped(1, 1)}); !errors.Is(err, purser.ErrNotFound) {
		t.Fatalf("a parent that does not exist: %v, want ErrNotFound", err)
	}
	if _, err := s.NamedBudget(ctx, "orphan"); !errors.Is(err, purser.ErrNotFound) {
		t.Fatalf("a budget refused for its parent was recorded: %v", err)
	}
	if err := s.CreateBudget(ctx, purser.NamedBudget{Name: "self", Parent: "self", Window: purser.WindowDay, Budget: capped(1, 1)}); !errors.Is(err, purser.ErrBudgetCycle) {
		t.Fatalf("a budget its own parent: %v, want ErrBudgetCycle", err)
	}
	var cycle *purser.BudgetCycleError
	err := open(t).SetBudgetParent(ctx, "org", "run-a", "u@h", "test", time.Now())
	if !errors.As(err, &cycle) || !slices.Equal(cycle.Path, []string{"org", "run-a", "repo-a1", "team-a", "org"}) {
		t.Fatalf("org under its own grandchild: %v, want a BudgetCycleError with the loop org → run-a → repo-a1 → team-a → org", err)
	}
	if got, _ := s.NamedBudget(ctx, "org"); got.Parent != "" {
		t.Fatalf("a refused move changed org's parent to %q", got.Parent)
	}

	if err := s.DrawFrom(ctx, "r1", []string{"run-a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DrawFrom(ctx, "r2", []string{"repo-b1"}); err != nil {
		t.Fatal(err)
	}
	if draws, err := open(t).RunDraws(ctx, "r1"); err != nil || !slices.Equal(draws, []string{"org", "team-a", "repo-a1", "run-a"}) {
		t.Fatalf("run r1 draws from %v (%v), want run-a and its ancestors, roots first", draws, err)
	}

	// Wednesday 2026-11-18: the day, the week from Monday the 16th, the
	// month from the 1st.
	day := time.Date(2026, 11, 18, 0, 0, 0, 0, time.UTC)
	for i, e := range []struct {
		run    string
		at     time.Time
		tokens int64
	}{
		{"r1", day.Add(time.Hour), 1},                             // today
		{"r1", day.Add(-time.Hour), 10},                           // this week, not today
		{"r1", time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), 100}, // this month, not this week
		{"r2", day.Add(2 * time.Hour), 1000},                      // today, the other team
		{"r3", day.Add(2 * time.Hour), 10_000},                    // a run drawing from nothing
	} {
		if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: fmt.Sprint("t", i), TaskID: "t", RunID: e.run, At: e.at,
			Event: budget.UsageEvent{InputTokens: e.tokens, USD: budget.USD(e.tokens), CostSource: budget.CostReported}}); err != nil {
			t.Fatal(err)
		}
	}
	now := day.Add(6 * time.Hour)
	for _, tc := range []struct {
		name string
		want int64
		runs []string
	}{
		{"run-a", 1, []string{"r1"}},
		{"repo-a1", 1, []string{"r1"}},
		{"team-a", 1 + 10, []string{"r1"}},
		{"org", 1 + 10 + 100 + 1000, []string{"r1", "r2"}},
		{"repo-b1", 1000, []string{"r2"}},
		{"run-b", 0, nil},
	} {
		st, err := open(t).NamedBudgetStatus(ctx, tc.name, now)
		if err != nil {
			t.Fatal(err)
		}
		if st.Spent.Tokens != tc.want || !slices.Equal(st.Runs, tc.runs) && len(st.Runs)+len(tc.runs) > 0 {
			t.Errorf("%s: spent %d tokens, runs %v; want %d, %v", tc.name, st.Spent.Tokens, st.Runs, tc.want, tc.runs)
		}
	}

	// A move to another parent takes the budget's runs along, and is
	// recorded.
	if err := s.SetBudgetParent(ctx, "repo-b1", "team-a", "u@h", "purser budgets raise", now); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.NamedBudgetStatus(ctx, "team-a", now); st.Spent.Tokens != 1+10+1000 {
		t.Errorf("team-a after repo-b1 moved under it: spent %d tokens, want %d", st.Spent.Tokens, 1+10+1000)
	}
	if rs, err := s.BudgetRaises(ctx, "repo-b1"); err != nil || len(rs) != 1 || rs[0].By != "u@h" {
		t.Errorf("the move's record: %+v (%v)", rs, err)
	}
}

// A hold is placed on the budget drawn from and every ancestor, or on
// none: the budget refusing it is named, nearest the root first, and a
// child's cap larger than what its parent has left is allowed, the parent
// binding.
func testNamedBudgetTreeHoldsAllOrNone(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	makeTree(t, s, [4]int64{10_000, 5_000, 100_000, 100_000}) // a child above its parent
	now := time.Now()
	release, err := s.ReserveNamed(ctx, "run-a", purser.Holder{}, budget.Amount{Tokens: 4000}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"org", "team-a", "repo-a1", "run-a"} {
		if st, _ := s.NamedBudgetStatus(ctx, n, now); st.Held.Tokens != 4000 {
			t.Errorf("%s holds %d tokens, want the 4,000 held on run-a", n, st.Held.Tokens)
		}
	}
	if st, _ := s.NamedBudgetStatus(ctx, "team-b", now); st.Held.Tokens != 0 {
		t.Errorf("team-b holds %d tokens, want none", st.Held.Tokens)
	}
	// team-a has 1,000 left: its repo's and run's 96,000 do not count.
	var ibe *budget.InsufficientBudgetError
	_, err = open(t).ReserveNamed(ctx, "run-a", purser.Holder{}, budget.Amount{Tokens: 2000}, now, time.Hour)
	if !errors.As(err, &ibe) || ibe.Scope != budget.ScopeNamed || ibe.Name != "team-a" || ibe.Available.Tokens != 1000 {
		t.Fatalf("a hold past team-a's cap: %v, want a refusal naming team-a with 1,000 tokens left", err)
	}
	for _, n := range []string{"org", "run-a", "repo-a1"} {
		if st, _ := s.NamedBudgetStatus(ctx, n, now); st.Held.Tokens != 4000 {
			t.Errorf("after the refusal %s holds %d tokens, want 4,000: a refused hold left part of itself", n, st.Held.Tokens)
		}
	}
	// Both teams short: the one nearer the root, org, is named.
	if _, err := s.ReserveNamedAll(ctx, []string{"run-a", "run-b"}, purser.Holder{}, budget.Amount{Tokens: 7000}, now, time.Hour); !errors.As(err, &ibe) || ibe.Name != "org" {
		t.Fatalf("a hold past org's and team-a's caps: %v, want a refusal naming org", err)
	}
	// Drawing from two runs of one tree holds once on their common
	// ancestors.
	r2, err := s.ReserveNamedAll(ctx, []string{"run-a", "run-b", "org"}, purser.Holder{}, budget.Amount{Tokens: 1000}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := s.NamedBudgetStatus(ctx, "org", now); st.Held.Tokens != 5000 {
		t.Errorf("org holds %d tokens, want 5,000: a hold counted twice on a common ancestor", st.Held.Tokens)
	}
	release()
	r2()
	for _, n := range []string{"org", "team-a", "team-b", "repo-a1", "repo-b1", "run-a", "run-b"} {
		if st, _ := s.NamedBudgetStatus(ctx, n, now); st.Held.Tokens != 0 {
			t.Errorf("released, %s still holds %d tokens", n, st.Held.Tokens)
		}
	}
	if _, err := s.ReserveNamedAll(ctx, []string{"run-a", "nope"}, purser.Holder{}, budget.Amount{Tokens: 1}, now, time.Hour); !errors.Is(err, purser.ErrNotFound) {
		t.Fatalf("a hold on a missing budget: %v, want ErrNotFound", err)
	}
}

// Forty holds at once across sibling branches of a four-level tree are
// granted exactly as far as the root's headroom goes; a raise of the root
// mid-run lets exactly as many more in.
func testNamedBudgetTreeUnderConcurrency(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	makeTree(t, s, [4]int64{10_000, 1_000_000, 1_000_000, 1_000_000})
	if err := s.DrawFrom(ctx, "r", []string{"run-a"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: "spent", TaskID: "t", RunID: "r", At: now,
		Event: budget.UsageEvent{InputTokens: 3000, USD: 1, CostSource: budget.CostReported}}); err != nil {
		t.Fatal(err)
	}
	const handles, perHandle = 4, 10
	want := budget.Amount{Tokens: 700} // 7,000 tokens left at org: fit 10 times
	round := func() (int, []*budget.InsufficientBudgetError) {
		var n atomic.Int64
		return reserveAtOnce(t, open, handles, perHandle, func(h Store) error {
			leaf := []string{"run-a", "run-b"}[n.Add(1)%2]
			_, err := h.ReserveNamed(ctx, leaf, purser.Holder{}, want, now, time.Hour)
			return err
		})
	}
	granted, refusals := round()
	for _, ibe := range refusals {
		if ibe.Scope != budget.ScopeNamed || ibe.Name != "org" {
			t.Errorf("refusal names %s %q, want the root, org", ibe.Scope, ibe.Name)
		}
	}
	if refused := len(refusals); granted != 10 || refused != handles*perHandle-10 {
		t.Fatalf("granted %d, refused %d; want exactly the 10 holds of 700 tokens org has room for", granted, refused)
	}
	org, _ := s.NamedBudgetStatus(ctx, "org", now)
	a, _ := s.NamedBudgetStatus(ctx, "team-a", now)
	b, _ := s.NamedBudgetStatus(ctx, "team-b", now)
	if org.Held.Tokens != 7000 || a.Held.Tokens+b.Held.Tokens != 7000 {
		t.Fatalf("org holds %d tokens, its teams %d + %d; want 7,000 in each", org.Held.Tokens, a.Held.Tokens, b.Held.Tokens)
	}
	// Raised mid-run by 7,000 tokens: ten more holds fit, no more.
	raised := capped(budget.Dollars(1000), 17_000)
	if err := s.RaiseBudget(ctx, purser.NamedBudgetRaise{Name: "org", At: now, By: "u@h", Source: "test", From: capped(budget.Dollars(1000), 10_000), To: raised}); err != nil {
		t.Fatal(err)
	}
	if granted, refusals = round(); granted != 10 || len(refusals) != handles*perHandle-10 {
		t.Fatalf("after the raise: granted %d, refused %d; want exactly 10 more", granted, len(refusals))
	}
}
