package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/sim"
	"github.com/purser-dev/purser/budget"
)

// fenceRecordingSim is the sim backend that remembers the money fence each
// call was given (CallRequest.MaxUSD).
type fenceRecordingSim struct {
	*sim.Backend
	mu     sync.Mutex
	fences []budget.USD
}

func (b *fenceRecordingSim) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	b.mu.Lock()
	b.fences = append(b.fences, req.MaxUSD)
	b.mu.Unlock()
	return b.Backend.Call(ctx, req, report)
}

// Issue 12 item 5: on a flat-rate plan (billing: subscription) the agent's
// dollars are list prices: a user on a plan is not stopped by phantom
// dollars (the task is steered by tokens, time and iterations, and the
// agent gets no money fence), while a user on an API key is stopped by the
// same dollars.
func TestSubscriptionDollarsAreListPricesNeverCapped(t *testing.T) {
	t.Parallel()
	// Three iterations at $0.40 each, the third fixing the task; the hard
	// cap is $0.50, so money spent would stop it in the second.
	const script = `
steps:
  - usage: {inputTokens: 1000, outputTokens: 100, costUsd: 0.40}
    delayMs: 50
  - usage: {inputTokens: 1000, outputTokens: 100, costUsd: 0.40}
    delayMs: 50
  - usage: {inputTokens: 1000, outputTokens: 100, costUsd: 0.40}
    files: {src/fixed: "yes"}
`
	for _, tc := range []struct {
		name      string
		billing   purser.Billing
		wantState purser.TaskState
		wantUsed  budget.USD // at least this was spent, no more than one call's $0.40 past it
		wantList  budget.USD
		wantFence bool
	}{
		{"a user on a plan runs to DONE; $1.20 at list, nothing spent", purser.BillingSubscription, purser.StateDone, 0, *usd("1.20"), false},
		{"a user on an API key is stopped at the $0.50 cap", purser.BillingAPI, purser.StateBlocked, *usd("0.50"), 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, script)
			f.task.Backend.Billing = tc.billing
			f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("0.50"), Tokens: ptr[int64](100_000), MaxIterations: ptr(5)}}
			rec := &fenceRecordingSim{}
			f.cfg.Backends = func(spec purser.BackendSpec) (purser.Backend, error) {
				b, err := sim.New(spec)
				rec.Backend = b
				return rec, err
			}
			err := f.run()
			if st := f.state(); st.State != tc.wantState {
				t.Fatalf("state %s (%v), want %s", st.State, err, tc.wantState)
			}
			if tc.wantState == purser.StateBlocked {
				var be *budget.BudgetExhaustedError
				if !errors.As(err, &be) || be.Metric != budget.Money {
					t.Fatalf("err = %v, want a stop by the money cap", err)
				}
			}
			st := budgetOf(t, f)
			// Cut mid-stream at the cap: the second call's $0.40 is not all spent.
			if st.UsedUSD < tc.wantUsed || st.UsedUSD > tc.wantUsed+*usd("0.30") || st.ListUSD != tc.wantList {
				t.Fatalf("used %s, list %s; want %s spent (the cap reached, cut mid-call), %s at list", st.UsedUSD, st.ListUSD, tc.wantUsed, tc.wantList)
			}
			entries, err := f.store.Usage(context.Background(), f.task.ID)
			must(t, err)
			for _, e := range entries {
				if e.Event.Tokens() == 0 {
					continue
				}
				if want := map[bool]budget.CostSource{true: budget.CostList, false: budget.CostReported}[tc.billing == purser.BillingSubscription]; e.Event.CostSource != want {
					t.Fatalf("ledger entry %s labelled %s, want %s", e.Key, e.Event.CostSource, want)
				}
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for i, fence := range rec.fences {
				if (fence > 0) != tc.wantFence {
					t.Fatalf("call %d given a money fence of %s; want one: %v", i+1, fence, tc.wantFence)
				}
			}
		})
	}
}
