package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// A task whose run draws from a named budget counts against it, and one
// whose named budget's window spend leaves no room for its next call stops
// BLOCKED before sending it, saying which budget.
func TestNamedBudgetAdmission(t *testing.T) {
	for _, tc := range []struct {
		name        string
		othersSpent int64 // tokens another run drawing from the budget spent today
		wantState   purser.TaskState
		underParent bool // the run draws from a child of the budget, which binds it
	}{
		{"the budget has room: the run's spend counts against it", 0, purser.StateDone, false},
		{"other runs spent the budget: BLOCKED naming it, no call sent", 99_900, purser.StateBlocked, false},
		{"other runs spent the parent of the budget drawn from: BLOCKED naming the parent", 99_900, purser.StateBlocked, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := newFixture(t, warnThenFix)
			f.cfg.Named = f.store
			f.task.Budget = budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(5)}}
			tokens := int64(100_000)
			must(t, f.store.CreateBudget(ctx, purser.NamedBudget{Name: "team", Window: purser.WindowMonth,
				Budget: budget.Config{Hard: budget.HardLimits{Tokens: &tokens}}}))
			drawn := "team"
			if tc.underParent {
				// The child's own cap is far above what its parent has left:
				// the parent still binds.
				childTokens := int64(10_000_000)
				must(t, f.store.CreateBudget(ctx, purser.NamedBudget{Name: "repo", Parent: "team", Window: purser.WindowDay,
					Budget: budget.Config{Hard: budget.HardLimits{Tokens: &childTokens}}}))
				drawn = "repo"
			}
			must(t, f.store.DrawFrom(ctx, "run-1", []string{drawn}))
			must(t, f.store.DrawFrom(ctx, "other", []string{"team"}))
			if tc.othersSpent > 0 {
				must(t, f.store.AppendUsage(ctx, purser.LedgerEntry{Key: "o", TaskID: "other-task", RunID: "other", At: time.Now(),
					Event: budget.UsageEvent{InputTokens: tc.othersSpent, CostSource: budget.CostNone}}))
			}
			err := f.run()
			rec := f.state()
			if rec.State != tc.wantState {
				t.Fatalf("state %s (%q, err %v), want %s", rec.State, rec.Reason, err, tc.wantState)
			}
			st, serr := f.store.NamedBudgetStatus(ctx, "team", time.Now())
			must(t, serr)
			own, terr := f.store.UsageTotals(ctx, f.task.ID)
			must(t, terr)
			if st.Spent.Tokens != tc.othersSpent+own.Tokens {
				t.Errorf("the named budget spent %d tokens, want the other run's %d + this task's %d", st.Spent.Tokens, tc.othersSpent, own.Tokens)
			}
			if st.Held != (budget.Amount{}) {
				t.Errorf("holds left on the named budget after the task: %+v", st.Held)
			}
			if tc.wantState == purser.StateDone {
				if own.Tokens == 0 {
					t.Fatal("the task spent nothing: the test proves nothing")
				}
				return
			}
			var ibe *budget.InsufficientBudgetError
			if !errors.As(err, &ibe) || ibe.Scope != budget.ScopeNamed || ibe.Name != "team" {
				t.Errorf("err = %v, want an InsufficientBudgetError naming the named budget team", err)
			}
			if !strings.Contains(rec.Reason, `month budget "team"`) || !strings.Contains(rec.Reason, "99900 of 100000 tokens spent") {
				t.Errorf("reason %q does not name the budget, its window and its spend of its cap", rec.Reason)
			}
			if n := len(f.calls()); n != 0 {
				t.Errorf("%d calls sent past the named budget", n)
			}
			status := readFile(t, filepath.Join(f.workspace, "STATUS.md"))
			for _, want := range []string{"**BLOCKED**", "named budget **team**", "purser budgets raise team"} {
				if !strings.Contains(status, want) {
					t.Errorf("STATUS.md lacks %q:\n%s", want, status)
				}
			}
		})
	}
}
