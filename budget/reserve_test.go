package budget_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/purser-dev/purser/budget"
)

func TestReservationAdmission(t *testing.T) {
	m := newManager(t, budget.Config{Hard: budget.HardLimits{USD: usd("1"), Tokens: ptr[int64](1000), MaxIterations: ptr(10)}}, budget.Options{})

	r1, err := m.Reserve(budget.Amount{USD: mustUSD(t, "0.6"), Tokens: 600})
	if err != nil {
		t.Fatal(err)
	}
	// Only $0.40 and 400 tokens are left for anyone else, though nothing is spent yet.
	_, err = m.Reserve(budget.Amount{USD: mustUSD(t, "0.5"), Tokens: 100})
	var ie *budget.InsufficientBudgetError
	if !errors.As(err, &ie) || !errors.Is(err, budget.ErrInsufficientBudget) {
		t.Fatalf("second reservation: err = %v, want InsufficientBudgetError", err)
	}
	if ie.Metric != budget.Money || ie.Available.USD != mustUSD(t, "0.4") || ie.Available.Tokens != 400 {
		t.Fatalf("says %s/%d tokens fit by %s, want $0.40/400 by money", ie.Available.USD, ie.Available.Tokens, ie.Metric)
	}
	if m.Status().Tier != budget.Optimal {
		t.Fatal("tiers count actual usage only, not reservations")
	}

	// Streamed usage moves out of the hold; the rest is released.
	r1.Record(budget.UsageEvent{InputTokens: 200, USD: mustUSD(t, "0.2"), CostSource: budget.CostEstimated})
	if h := r1.Held(); h.USD != mustUSD(t, "0.4") || h.Tokens != 400 {
		t.Fatalf("held after streaming = %+v", h)
	}
	if a := m.Available(); a.USD != mustUSD(t, "0.4") || a.Tokens != 400 {
		t.Fatalf("available = %+v, want $0.40 and 400 (used $0.20 + held $0.40)", a)
	}
	r1.Release()
	r1.Release() // idempotent
	if a := m.Available(); a.USD != mustUSD(t, "0.8") || a.Tokens != 800 {
		t.Fatalf("available after release = %+v", a)
	}
	if got := m.Reserved(); got != (budget.Amount{}) {
		t.Fatalf("reserved after release = %+v", got)
	}
}

func TestReserveRefusedAtHardCap(t *testing.T) {
	m := newManager(t, budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(1)}}, budget.Options{})
	m.RecordUsage(budget.UsageEvent{IterationEnd: true})
	_, err := m.Reserve(budget.Amount{})
	var be *budget.BudgetExhaustedError
	if !errors.As(err, &be) || be.Metric != budget.Iterations {
		t.Fatalf("err = %v, want BudgetExhaustedError by iterations", err)
	}
}

func TestReservationSpansTaskAndRun(t *testing.T) {
	run := newManager(t, budget.Config{Hard: budget.HardLimits{Tokens: ptr[int64](1000), MaxIterations: ptr(100)}}, budget.Options{Scope: budget.ScopeRun})
	a := newManager(t, budget.Config{Hard: budget.HardLimits{Tokens: ptr[int64](800), MaxIterations: ptr(100)}}, budget.Options{Parent: run})
	b := newManager(t, budget.Config{Hard: budget.HardLimits{Tokens: ptr[int64](800), MaxIterations: ptr(100)}}, budget.Options{Parent: run})
	if _, err := a.Reserve(budget.Amount{Tokens: 700}); err != nil {
		t.Fatal(err)
	}
	_, err := b.Reserve(budget.Amount{Tokens: 400})
	var ie *budget.InsufficientBudgetError
	if !errors.As(err, &ie) || ie.Scope != budget.ScopeRun || ie.Available.Tokens != 300 {
		t.Fatalf("err = %v, want run short with 300 tokens available", err)
	}
}

// Concurrent reservations on a task or its run can never together pass the
// hard cap, however the calls interleave.
func TestConcurrentReservationsNeverOvershoot(t *testing.T) {
	run := newManager(t, budget.Config{Hard: budget.HardLimits{USD: usd("10"), Tokens: ptr[int64](200_000), MaxIterations: ptr(1 << 30)}}, budget.Options{Scope: budget.ScopeRun})
	var wg sync.WaitGroup
	for w := range 16 {
		task := newManager(t, budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(1 << 30)}}, budget.Options{Parent: run})
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 500 {
				want := budget.Amount{USD: budget.USD(rng.Int64N(int64(budget.Dollars(1)/10)) + 1), Tokens: rng.Int64N(2000) + 1}
				r, err := task.Reserve(want)
				if err != nil {
					if !errors.Is(err, budget.ErrInsufficientBudget) && !errors.As(err, new(*budget.BudgetExhaustedError)) {
						t.Errorf("unexpected error: %v", err)
					}
					continue
				}
				// The call uses some of what it reserved, in two streamed parts.
				half := budget.UsageEvent{InputTokens: want.Tokens / 2, USD: want.USD / 2, CostSource: budget.CostEstimated}
				r.Record(half)
				r.Commit(budget.UsageEvent{OutputTokens: rng.Int64N(want.Tokens - want.Tokens/2 + 1), USD: budget.USD(rng.Int64N(int64(want.USD-want.USD/2) + 1)), CostSource: budget.CostEstimated})
			}
		}()
	}
	wg.Wait()
	st := run.Status()
	if st.UsedUSD > budget.Dollars(10) || st.UsedTokens > 200_000 {
		t.Fatalf("run overshot its hard cap: %s and %d tokens", st.UsedUSD, st.UsedTokens)
	}
	if run.Reserved() != (budget.Amount{}) {
		t.Fatalf("reservations leaked: %+v", run.Reserved())
	}
	if st.UsedUSD < budget.Dollars(9) && st.UsedTokens < 190_000 {
		t.Fatalf("test did not push against the cap: %s, %d tokens", st.UsedUSD, st.UsedTokens)
	}
}

// Concurrent recording loses nothing.
func TestConcurrentRecordingIsExact(t *testing.T) {
	run := newManager(t, budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(1 << 30)}}, budget.Options{Scope: budget.ScopeRun})
	var wg sync.WaitGroup
	for range 8 {
		task := newManager(t, budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(1 << 30)}}, budget.Options{Parent: run})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				task.RecordUsage(budget.UsageEvent{InputTokens: 3, OutputTokens: 1, USD: budget.Dollars(1) / 10, CostSource: budget.CostReported})
			}
		}()
	}
	wg.Wait()
	st := run.Status()
	if st.UsedTokens != 32_000 || st.UsedUSD != budget.Dollars(800) {
		t.Fatalf("run used %d tokens, %s; want 32000 and $800.00", st.UsedTokens, st.UsedUSD)
	}
}
