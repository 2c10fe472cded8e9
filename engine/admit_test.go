package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// heldRun is a shared run budget whose store refuses the first refusals
// holds as though other processes held what is left, then grants.
type heldRun struct {
	mu       sync.Mutex
	refusals int
	tries    int
}

func (h *heldRun) ReserveRun(_ context.Context, _ string, _ purser.Holder, _, want budget.Amount, _ time.Duration) (func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tries++
	if h.tries <= h.refusals {
		return nil, &budget.InsufficientBudgetError{Metric: budget.Tokens, Want: want, Available: budget.Amount{USD: budget.UnlimitedUSD, Tokens: 10}}
	}
	return func() {}, nil
}

func (h *heldRun) RunAvailable(context.Context, string, budget.Amount) (budget.Amount, error) {
	return budget.Amount{USD: budget.UnlimitedUSD, Tokens: 10}, nil
}

// A fleet's call refused only because other processes hold the run's
// budget for their calls in flight waits for those holds to end, and is
// then admitted; one refused because the run's spend leaves no room stops
// at once.
func TestSharedRunAdmissionWaitsForOthersHolds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		runSpent  int64
		wantErr   bool
		wantTries int
	}{
		{"others' holds stand in the way: the call waits and is admitted", 0, false, 4},
		{"the run's spend leaves no room: refused at once", 99_990, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runCap, iters := int64(100_000), 10
			run, err := budget.NewManager(budget.Config{Hard: budget.HardLimits{Tokens: &runCap, MaxIterations: &iters}},
				budget.Options{Scope: budget.ScopeRun, Initial: budget.Totals{Tokens: tc.runSpent}})
			if err != nil {
				t.Fatal(err)
			}
			task, err := budget.NewManager(budget.Config{Hard: budget.HardLimits{MaxIterations: &iters}}, budget.Options{Parent: run})
			if err != nil {
				t.Fatal(err)
			}
			held := &heldRun{refusals: 3}
			cfg := Config{Store: nil, Shared: held}.WithDefaults()
			tr := &taskRun{e: &Engine{cfg: cfg}, runID: "r", budget: task, log: slog.New(slog.DiscardHandler),
				task: purser.Task{ID: "t"}}
			want, maxOut := tr.worstCase("m", 1_000, cfg.ReserveOutputTokens)
			_, release, err := tr.reserveShared(context.Background(), "m", 1_000, callSize{want: want, maxOut: maxOut})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			var short *budget.InsufficientBudgetError
			if tc.wantErr && !errors.As(err, &short) {
				t.Fatalf("err = %v, want the budget's refusal", err)
			}
			if release != nil {
				release()
			}
			if held.tries != tc.wantTries {
				t.Errorf("%d attempts at the run's hold, want %d", held.tries, tc.wantTries)
			}
		})
	}
}
