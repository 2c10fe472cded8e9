package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/engine"
)

// A task whose file says drawFrom: draws from those named budgets in a run
// of its own (no --run, no --draw-from): its run is recorded as drawing
// from them, their HARD cap refuses its call, and an unknown name refuses
// the batch before anything is recorded.
func TestTaskDrawFromNamedBudgets(t *testing.T) {
	for _, tc := range []struct {
		name      string
		drawFrom  []string
		named     bool  // the engine has the store's named budgets
		capTokens int64 // the named budget team's hard cap
		wantState purser.TaskState
		wantErr   string // for a refused batch
	}{
		{"the budget has room: DONE, its run drawing from it", []string{"team"}, true, 100_000, purser.StateDone, ""},
		{"the budget's cap is below any call: BLOCKED naming it", []string{"team"}, true, 100, purser.StateBlocked, ""},
		{"an unknown budget refuses the batch, naming it", []string{"team", "nope"}, true, 100_000, "", `no named budget "nope"`},
		{"a store without named budgets refuses the batch", []string{"team"}, false, 100_000, "", "keeps no named budgets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := newFixture(t, warnThenFix)
			if tc.named {
				f.cfg.Named = f.store
			}
			f.task.DrawFrom = tc.drawFrom
			must(t, f.store.CreateBudget(ctx, purser.NamedBudget{Name: "team", Window: purser.WindowMonth,
				Budget: budget.Config{Hard: budget.HardLimits{Tokens: &tc.capTokens}}}))
			outcomes, err := f.engine().RunBatch(ctx, engine.Batch{Tasks: []purser.Task{f.task}, Parallel: 1})
			if tc.wantErr != "" {
				var re *engine.RequestError
				if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a RequestError containing %q", err, tc.wantErr)
				}
				if _, err := f.store.Task(ctx, f.task.ID); !errors.Is(err, purser.ErrNotFound) {
					t.Fatalf("the refused task was recorded (%v)", err)
				}
				if st, err := f.store.NamedBudgetStatus(ctx, "team", time.Now()); err != nil || len(st.Runs) != 0 {
					t.Fatalf("runs drawing from team after a refused batch: %v (%v), want none", st.Runs, err)
				}
				return
			}
			must(t, err)
			rec := f.state()
			if rec.State != tc.wantState {
				t.Fatalf("state %s (%q, %v), want %s", rec.State, rec.Reason, outcomes[0].Err, tc.wantState)
			}
			draws, err := f.store.RunDraws(ctx, rec.RunID)
			if err != nil || len(draws) != 1 || draws[0] != "team" {
				t.Fatalf("run %s draws from %v (%v), want [team]", rec.RunID, draws, err)
			}
			if tc.wantState == purser.StateBlocked {
				var ibe *budget.InsufficientBudgetError
				if !errors.As(outcomes[0].Err, &ibe) || ibe.Scope != budget.ScopeNamed || ibe.Name != "team" {
					t.Fatalf("err = %v, want an InsufficientBudgetError naming the named budget team", outcomes[0].Err)
				}
				if n := len(f.calls()); n != 0 {
					t.Fatalf("%d calls sent past the named budget's cap", n)
				}
				return
			}
			st, err := f.store.NamedBudgetStatus(ctx, "team", time.Now())
			must(t, err)
			own, err := f.store.UsageTotals(ctx, f.task.ID)
			must(t, err)
			if own.Tokens == 0 || st.Spent.Tokens != own.Tokens {
				t.Fatalf("team counts %d tokens, the task spent %d: want them equal, and not 0", st.Spent.Tokens, own.Tokens)
			}
		})
	}
}
