package engine_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// Issue 22 item 13: a named budget's money cap holds for a model with no
// catalogue price when the backend reports every dollar. Admission cannot
// price such a call, so its worst case holds no dollars; the dollars it
// reports count against the budget as they arrive, the task stops BLOCKED
// naming the budget, and a resume while the window's budget is spent is
// refused without a call.
func TestNamedBudgetMoneyCapHoldsForAnUnpricedModel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		delayMs int
		// most is the most the named budget may end at: a whole call past
		// the cap when the call reports its dollars at once, one streamed
		// chunk past it when they stream.
		most      string
		wantCalls int // 0: not checked
	}{
		{"reported at once: the call that reaches the cap is the last", 0, "0.06", 4},
		{"reported as it streams: the call is cut mid-stream", 300, "0.052", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			script := "steps:\n  - usage: {inputTokens: 500, outputTokens: 100, costUsd: 0.015}\n"
			if tc.delayMs > 0 {
				script += "    delayMs: " + strconv.Itoa(tc.delayMs) + "\n"
			}
			f := newFixture(t, script)
			f.cfg.Named = f.store
			f.task.Backend.Models = map[string]string{"standard": "sim-large"}
			f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("1"), MaxIterations: ptr(10)}}
			must(t, f.store.CreateBudget(ctx, purser.NamedBudget{Name: "team", Window: purser.WindowDay,
				Budget: budget.Config{Hard: budget.HardLimits{USD: usd("0.05")}}}))
			must(t, f.store.DrawFrom(ctx, "run-1", []string{"team"}))

			err := f.run()
			rec := f.state()
			if rec.State != purser.StateBlocked {
				t.Fatalf("state %s (%q, err %v), want BLOCKED by the named budget", rec.State, rec.Reason, err)
			}
			var ibe *budget.InsufficientBudgetError
			if !errors.As(err, &ibe) || ibe.Scope != budget.ScopeNamed || ibe.Name != "team" || ibe.Metric != budget.Money {
				t.Errorf("err = %v, want an InsufficientBudgetError on money naming the named budget team", err)
			}
			if !strings.Contains(rec.Reason, `budget "team"`) {
				t.Errorf("reason %q does not name the budget", rec.Reason)
			}
			named := false
			f.mu.Lock()
			for _, ev := range f.events {
				named = named || strings.Contains(ev.Message, `"team"`)
			}
			f.mu.Unlock()
			if !named {
				t.Error("no event names the named budget team")
			}
			st, serr := f.store.NamedBudgetStatus(ctx, "team", time.Now())
			must(t, serr)
			if most := mustUSD(t, tc.most); st.Spent.USD > most || st.Spent.USD < mustUSD(t, "0.05") {
				t.Errorf("the named budget ended at %s, want from $0.05 to %s", st.Spent.USD, most)
			}
			calls := len(f.calls())
			if tc.wantCalls > 0 && calls != tc.wantCalls {
				t.Errorf("%d calls sent, want %d", calls, tc.wantCalls)
			}

			// A resume while the window's budget is spent is refused: no
			// call, no dollar more.
			err = f.engine().RunTask(ctx, f.task, nil, "run-1")
			if !errors.As(err, &ibe) || ibe.Scope != budget.ScopeNamed || ibe.Name != "team" {
				t.Errorf("resume: err = %v, want the named budget team to refuse it", err)
			}
			if n := len(f.calls()); n != calls {
				t.Errorf("resume sent %d calls past the spent named budget", n-calls)
			}
			after, serr := f.store.NamedBudgetStatus(ctx, "team", time.Now())
			must(t, serr)
			if after.Spent.USD != st.Spent.USD {
				t.Errorf("resume drew %s more from the spent named budget", after.Spent.USD-st.Spent.USD)
			}
			if after.Held != (budget.Amount{}) {
				t.Errorf("holds left on the named budget: %+v", after.Held)
			}
		})
	}
}
