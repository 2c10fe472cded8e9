package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

func capped(usd budget.USD, tokens int64) budget.Config {
	return budget.Config{Hard: budget.HardLimits{USD: &usd, Tokens: &tokens}}
}

// A named budget's spend is the ledger of the runs drawing from it whose
// time is inside the window holding now: an injected clock places the
// window, and each window's first nanosecond belongs to it.
func testNamedBudgetWindows(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	for _, b := range []purser.NamedBudget{
		{Name: "daily", Window: purser.WindowDay, Budget: capped(budget.Dollars(50), 1_000_000)},
		{Name: "weekly", Window: purser.WindowWeek, Budget: capped(budget.Dollars(50), 1_000_000)},
		{Name: "monthly", Window: purser.WindowMonth, Budget: capped(budget.Dollars(500), 1_000_000)},
		{Name: "ny-daily", Window: purser.WindowDay, Zone: "America/New_York", Budget: capped(budget.Dollars(50), 1_000_000)},
	} {
		if err := s.CreateBudget(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := s.DrawFrom(ctx, "r", []string{b.Name}); err != nil {
			t.Fatal(err)
		}
	}
	// Wednesday 2026-11-18 00:00 UTC is the day's start; Monday 11-16 the
	// week's; 11-01 the month's; 05:00 UTC New York's midnight.
	day := time.Date(2026, 11, 18, 0, 0, 0, 0, time.UTC)
	entries := []struct {
		at     time.Time
		tokens int64
	}{
		{day.Add(-time.Nanosecond), 1},                            // yesterday's last instant
		{day, 10},                                                 // today's first
		{day.Add(4 * time.Hour), 100},                             // today, before New York's midnight
		{day.Add(5 * time.Hour), 1000},                            // New York's today
		{time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC), 10_000},   // this Monday
		{time.Date(2026, 11, 15, 23, 0, 0, 0, time.UTC), 100_000}, // last Sunday
		{time.Date(2026, 10, 31, 23, 0, 0, 0, time.UTC), 200_000}, // last month
	}
	for i, e := range entries {
		if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: "w" + string(rune('a'+i)), TaskID: "t", RunID: "r", At: e.at,
			Event: budget.UsageEvent{InputTokens: e.tokens, USD: budget.USD(e.tokens), CostSource: budget.CostReported}}); err != nil {
			t.Fatal(err)
		}
	}
	// A run not drawing from the budgets counts for none of them.
	if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: "other", TaskID: "t2", RunID: "other", At: day.Add(time.Hour),
		Event: budget.UsageEvent{InputTokens: 7, USD: 7, CostSource: budget.CostReported}}); err != nil {
		t.Fatal(err)
	}
	now := day.Add(6 * time.Hour)
	for _, tc := range []struct {
		name  string
		now   time.Time
		want  int64
		start time.Time
	}{
		{"daily", now, 10 + 100 + 1000, day},
		{"daily", day.Add(24 * time.Hour), 0, day.Add(24 * time.Hour)},
		{"daily", day.Add(-time.Nanosecond), 1, day.Add(-24 * time.Hour)},
		{"weekly", now, 1 + 10 + 100 + 1000 + 10_000, time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC)},
		{"monthly", now, 1 + 10 + 100 + 1000 + 10_000 + 100_000, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{"ny-daily", now, 1000, time.Date(2026, 11, 18, 0, 0, 0, 0, ny)},
	} {
		st, err := open(t).NamedBudgetStatus(ctx, tc.name, tc.now)
		if err != nil {
			t.Fatal(err)
		}
		if st.Spent.Tokens != tc.want || st.Spent.USD != budget.USD(tc.want) || !st.WindowStart.Equal(tc.start) {
			t.Errorf("%s at %s: spent %d tokens, %d nano-dollars from %s; want %d from %s", tc.name, tc.now,
				st.Spent.Tokens, st.Spent.USD, st.WindowStart, tc.want, tc.start)
		}
	}
}

// Many processes reserving against one named budget at once never hold
// more than its caps between them, the window's spend counted.
func testNamedBudgetUnderConcurrency(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	if err := s.CreateBudget(ctx, purser.NamedBudget{Name: "team", Window: purser.WindowMonth, Budget: capped(budget.Dollars(1), 10_000)}); err != nil {
		t.Fatal(err)
	}
	if err := s.DrawFrom(ctx, "r", []string{"team"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: "spent", TaskID: "t", RunID: "r", At: now,
		Event: budget.UsageEvent{InputTokens: 3000, USD: 1, CostSource: budget.CostReported}}); err != nil {
		t.Fatal(err)
	}
	const handles, perHandle = 4, 10
	want := budget.Amount{USD: 30_000_000, Tokens: 700} // 7,000 tokens left: fit 10 times
	granted, refusals := reserveAtOnce(t, open, handles, perHandle, func(h Store) error {
		_, err := h.ReserveNamed(ctx, "team", purser.Holder{}, want, now, time.Hour)
		return err
	})
	for _, ibe := range refusals {
		if ibe.Scope != budget.ScopeNamed || ibe.Name != "team" {
			t.Errorf("refusal names %s %q, want the named budget team", ibe.Scope, ibe.Name)
		}
	}
	if refused := len(refusals); granted != 10 || refused != handles*perHandle-10 {
		t.Fatalf("granted %d, refused %d; want exactly 10 holds of 700 tokens in the 7,000 left", granted, refused)
	}
	st, err := s.NamedBudgetStatus(ctx, "team", now)
	if err != nil {
		t.Fatal(err)
	}
	if st.Spent.Tokens+st.Held.Tokens > 10_000 {
		t.Fatalf("spent %d + held %d tokens: past the 10,000 cap", st.Spent.Tokens, st.Held.Tokens)
	}
}

func testNamedBudgetLifecycle(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	b := purser.NamedBudget{Name: "repo", Window: purser.WindowDay, Budget: capped(budget.Dollars(50), 1000)}
	if err := s.CreateBudget(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := open(t).CreateBudget(ctx, b); !errors.Is(err, purser.ErrBudgetExists) {
		t.Fatalf("creating a taken name: %v, want ErrBudgetExists", err)
	}
	mins := budget.Minutes(time.Hour)
	bad := b
	bad.Name, bad.Budget.Hard.TimeMinutes = "timed", &mins
	var ve *budget.ValidationError
	if err := s.CreateBudget(ctx, bad); !errors.As(err, &ve) || ve.Field != "hard.timeMinutes" {
		t.Fatalf("a named budget capping time: %v, want a ValidationError on hard.timeMinutes", err)
	}
	if _, err := s.NamedBudget(ctx, "nope"); !errors.Is(err, purser.ErrNotFound) {
		t.Fatalf("a missing budget: %v, want ErrNotFound", err)
	}
	if err := s.DrawFrom(ctx, "r", []string{"repo", "nope"}); !errors.Is(err, purser.ErrNotFound) {
		t.Fatalf("drawing from a missing budget: %v, want ErrNotFound", err)
	}
	if st, _ := s.NamedBudgetStatus(ctx, "repo", time.Now()); len(st.Runs) != 0 {
		t.Fatalf("a failed DrawFrom recorded %v", st.Runs)
	}
	if err := s.DrawFrom(ctx, "r", []string{"repo"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DrawFrom(ctx, "r", []string{"repo"}); err != nil {
		t.Fatalf("drawing again from the same budget: %v", err)
	}
	if draws, err := open(t).RunDraws(ctx, "r"); err != nil || len(draws) != 1 || draws[0] != "repo" {
		t.Fatalf("run r draws from %v (%v), want [repo]", draws, err)
	}
	if draws, err := s.RunDraws(ctx, "other"); err != nil || len(draws) != 0 {
		t.Fatalf("a run drawing from nothing draws from %v (%v)", draws, err)
	}
	// At HARD every hold is refused, naming the budget.
	now := time.Now()
	if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: "k", TaskID: "t", RunID: "r", At: now,
		Event: budget.UsageEvent{InputTokens: 1000, USD: 1, CostSource: budget.CostReported}}); err != nil {
		t.Fatal(err)
	}
	var ibe *budget.InsufficientBudgetError
	if _, err := s.ReserveNamed(ctx, "repo", purser.Holder{}, budget.Amount{Tokens: 1}, now, time.Hour); !errors.As(err, &ibe) || ibe.Name != "repo" || ibe.Scope != budget.ScopeNamed {
		t.Fatalf("a hold on a budget at its cap: %v, want an InsufficientBudgetError naming repo", err)
	}
	st, err := s.NamedBudgetStatus(ctx, "repo", now)
	if err != nil || st.Tier() != budget.Hard || len(st.Runs) != 1 || st.Runs[0] != "r" {
		t.Fatalf("status at the cap: %+v (%v), want HARD drawn on by run r", st, err)
	}
	raised := capped(budget.Dollars(50), 5000)
	if err := s.RaiseBudget(ctx, purser.NamedBudgetRaise{Name: "repo", At: now, By: "u@h", Source: "b.yaml", From: b.Budget, To: raised}); err != nil {
		t.Fatal(err)
	}
	release, err := open(t).ReserveNamed(ctx, "repo", purser.Holder{}, budget.Amount{Tokens: 4000}, now, time.Hour)
	if err != nil {
		t.Fatalf("a hold after the raise: %v", err)
	}
	release()
	got, err := s.NamedBudget(ctx, "repo")
	if err != nil || *got.Budget.Hard.Tokens != 5000 || got.Window != purser.WindowDay {
		t.Fatalf("the raised budget: %+v (%v)", got, err)
	}
	rs, err := s.BudgetRaises(ctx, "repo")
	if err != nil || len(rs) != 1 || rs[0].By != "u@h" || rs[0].Source != "b.yaml" || *rs[0].From.Hard.Tokens != 1000 || *rs[0].To.Hard.Tokens != 5000 || !rs[0].At.Equal(now) {
		t.Fatalf("raises: %+v (%v)", rs, err)
	}
	if err := s.RaiseBudget(ctx, purser.NamedBudgetRaise{Name: "nope", To: raised}); !errors.Is(err, purser.ErrNotFound) {
		t.Fatalf("raising a missing budget: %v, want ErrNotFound", err)
	}
	list, err := s.NamedBudgetList(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "repo" {
		t.Fatalf("list: %+v (%v)", list, err)
	}
}
