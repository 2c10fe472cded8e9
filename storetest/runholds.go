package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// A run hold decides on the same account as RunAvailable reads, however its
// holds ended: released, dropped as a dead owner's, or expired. After each,
// a hold of exactly what RunAvailable says is left is granted and one token
// more is refused, from another handle; and after many handles held,
// spent and released at once, the whole headroom comes back.
func testSharedRunHoldsComeBackHoweverTheyEnd(t *testing.T, open Opener) {
	ctx := t.Context()
	s, other := open(t), open(t)
	caps := budget.Amount{USD: budget.Dollars(1), Tokens: 10_000}
	exact := func(what string, wantLeft int64) {
		t.Helper()
		left, err := other.RunAvailable(ctx, "r", caps)
		if err != nil || left.Tokens != wantLeft {
			t.Fatalf("%s: %+v (%v) left, want %d tokens", what, left, err, wantLeft)
		}
		var ibe *budget.InsufficientBudgetError
		if _, err := other.ReserveRun(ctx, "r", purser.Holder{}, caps, budget.Amount{Tokens: left.Tokens + 1}, time.Hour); !errors.As(err, &ibe) || ibe.Available.Tokens != left.Tokens {
			t.Fatalf("%s: a hold of one token more than the %d left: %v, want a refusal saying %d", what, left.Tokens, err, left.Tokens)
		}
		release, err := other.ReserveRun(ctx, "r", purser.Holder{}, caps, left, time.Hour)
		if err != nil {
			t.Fatalf("%s: a hold of the %d left: %v", what, left.Tokens, err)
		}
		release()
	}
	release, err := s.ReserveRun(ctx, "r", purser.Holder{}, caps, budget.Amount{Tokens: 3000}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	exact("a live hold of 3000", 7000)
	release()
	exact("the hold released", 10_000)

	if _, err := s.ReserveRun(ctx, "r", purser.Holder{Owner: "dead 1 1", TaskID: "t"}, caps, budget.Amount{Tokens: 4000}, time.Hour); err != nil {
		t.Fatal(err)
	}
	exact("a dead owner's hold of 4000", 6000)
	if _, err := other.(purser.HoldDropper).DropHolds(ctx, "dead 1 1", ""); err != nil {
		t.Fatal(err)
	}
	exact("the dead owner's hold dropped", 10_000)

	if _, err := s.ReserveRun(ctx, "r", purser.Holder{}, caps, budget.Amount{Tokens: 10_000}, time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	exact("a hold of everything, expired", 10_000)

	churn(t, open, caps)
	exact("after 4 handles held, spent and released 20 times each", 10_000-4*20*10)
}

// churn has 4 handles hold, spend 10 tokens of and release 100 tokens, 20
// times each, at once.
func churn(t *testing.T, open Opener, caps budget.Amount) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range 4 {
		s := open(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				release, err := s.ReserveRun(t.Context(), "r", purser.Holder{}, caps, budget.Amount{Tokens: 100}, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				err = s.AppendUsage(t.Context(), purser.LedgerEntry{Key: fmt.Sprintf("w%d-%d", w, i), TaskID: "t", RunID: "r",
					Event: budget.UsageEvent{OutputTokens: 10}})
				release()
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A handle that held on a tree before sees a change another handle made to
// it since: a cap lowered on the root refuses what the old cap let in, and
// a budget moved under another root holds there, not on its old root.
func testNamedHoldsSeeChangesFromAnotherHandle(t *testing.T, open Opener) {
	ctx := t.Context()
	a, b := open(t), open(t)
	now := time.Now()
	for _, nb := range []purser.NamedBudget{
		{Name: "org", Budget: capped(budget.Dollars(100), 1000)},
		{Name: "other", Budget: capped(budget.Dollars(100), 10_000)},
		{Name: "team", Parent: "org", Budget: capped(budget.Dollars(100), 10_000)},
	} {
		nb.Window = purser.WindowMonth
		if err := b.CreateBudget(ctx, nb); err != nil {
			t.Fatal(err)
		}
	}
	hold := func(tokens int64) error {
		_, err := a.ReserveNamed(ctx, "team", purser.Holder{}, budget.Amount{Tokens: tokens}, now, time.Hour)
		return err
	}
	if err := hold(600); err != nil {
		t.Fatal(err)
	}
	if err := b.RaiseBudget(ctx, purser.NamedBudgetRaise{Name: "org", At: now, By: "u@h", Source: "test",
		From: capped(budget.Dollars(100), 1000), To: capped(budget.Dollars(100), 700)}); err != nil {
		t.Fatal(err)
	}
	var ibe *budget.InsufficientBudgetError
	if err := hold(200); !errors.As(err, &ibe) || ibe.Name != "org" || ibe.Available.Tokens != 100 {
		t.Fatalf("a hold of 200 after org's cap was lowered to 700 (600 held): %v, want org's refusal with 100 left", err)
	}
	if err := b.SetBudgetParent(ctx, "team", "other", "u@h", "test", now); err != nil {
		t.Fatal(err)
	}
	if err := hold(200); err != nil {
		t.Fatalf("a hold of 200 once team is under other: %v", err)
	}
	org, _ := b.NamedBudgetStatus(ctx, "org", now)
	other, _ := b.NamedBudgetStatus(ctx, "other", now)
	if org.Held.Tokens != 600 || other.Held.Tokens != 200 {
		t.Fatalf("held on org %d, on other %d; want 600 (before the move) and 200", org.Held.Tokens, other.Held.Tokens)
	}
}

// Handles that have held on a tree before (a PostgreSQL store then decides
// from the budgets it remembers, in one batch) still never hold more than
// the root's cap between them.
func testWarmNamedHoldsNeverPassTheCap(t *testing.T, open Opener) {
	ctx := t.Context()
	now := time.Now()
	s := open(t)
	for _, nb := range []purser.NamedBudget{{Name: "org", Budget: capped(budget.Dollars(100), 7000)}, {Name: "team", Parent: "org", Budget: capped(budget.Dollars(100), 100_000)}} {
		nb.Window = purser.WindowMonth
		if err := s.CreateBudget(ctx, nb); err != nil {
			t.Fatal(err)
		}
	}
	handles := make([]Store, 4)
	for i := range handles {
		handles[i] = open(t)
		release, err := handles[i].ReserveNamed(ctx, "team", purser.Holder{}, budget.Amount{Tokens: 1}, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	granted := 0
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := handles[i%len(handles)].ReserveNamed(ctx, "team", purser.Holder{}, budget.Amount{Tokens: 700}, now, time.Hour)
			var ibe *budget.InsufficientBudgetError
			if err != nil && !errors.As(err, &ibe) {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				granted++
			}
		}()
	}
	wg.Wait()
	if granted != 10 {
		t.Fatalf("%d holds of 700 granted on warm handles; want exactly the 10 org's 7,000 has room for", granted)
	}
}
