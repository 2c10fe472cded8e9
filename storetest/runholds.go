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
