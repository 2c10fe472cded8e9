package budget_test

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser/budget"
)

// Spec: Budget metrics are independent and optional — the note the model
// reads (budgetHint:) says what is left of each configured metric only, the
// tightest of the task and its run, and money nobody priced as unknown,
// never $0.
func TestHintSaysOnlyConfiguredMetrics(t *testing.T) {
	for _, tc := range []struct {
		name        string
		task, run   budget.Config
		ev          budget.UsageEvent
		want, never []string
	}{
		{"money and iterations, spent at a price",
			budget.Config{Hard: budget.HardLimits{USD: usd("1"), MaxIterations: ptr(5)}}, budget.Config{},
			budget.UsageEvent{InputTokens: 100, USD: mustUSD(t, "0.25"), CostSource: budget.CostEstimated},
			[]string{"$0.75 of $1.00", "5 of 5 iterations", "OPTIMAL"}, []string{"tokens", "unknown"}},
		{"tokens only, the run's tighter",
			budget.Config{Hard: budget.HardLimits{Tokens: ptr[int64](10_000), MaxIterations: ptr(3)}},
			budget.Config{Hard: budget.HardLimits{Tokens: ptr[int64](1_000), MaxIterations: ptr(9)}},
			budget.UsageEvent{InputTokens: 400, CostSource: budget.CostUnknown},
			[]string{"600 of 1000 tokens (run)", "3 of 3 iterations"}, []string{"$"}},
		{"money capped, spend unpriced: unknown, never $0",
			budget.Config{Hard: budget.HardLimits{USD: usd("1"), MaxIterations: ptr(5)}}, budget.Config{},
			budget.UsageEvent{InputTokens: 400, CostSource: budget.CostUnknown},
			[]string{"money left unknown (cap $1.00"}, []string{"$0.00 of", "$1.00 of $1.00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var parent *budget.Manager
			if tc.run.Hard.MaxIterations != nil {
				parent = newManager(t, tc.run, budget.Options{Scope: budget.ScopeRun})
			}
			m := newManager(t, tc.task, budget.Options{Parent: parent})
			m.RecordUsage(tc.ev)
			got := m.Hint()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("hint %q lacks %q", got, w)
				}
			}
			for _, n := range tc.never {
				if strings.Contains(got, n) {
					t.Errorf("hint %q says %q", got, n)
				}
			}
		})
	}
}

// The refusal at Purser's door names the cap as a config writes it.
func TestCapLabelNamesTheCap(t *testing.T) {
	for _, tc := range []struct {
		err  budget.BudgetExhaustedError
		want string
	}{
		{budget.BudgetExhaustedError{Scope: budget.ScopeTask, Metric: budget.Money, Limit: int64(mustUSD(t, "1"))}, "hard usd $1.00"},
		{budget.BudgetExhaustedError{Scope: budget.ScopeRun, Metric: budget.Tokens, Limit: 17_000}, "run hard tokens 17000"},
		{budget.BudgetExhaustedError{Scope: budget.ScopeNamed, Name: "team", Metric: budget.Money, Limit: int64(mustUSD(t, "5"))}, `named "team" hard usd $5.00`},
	} {
		if got := tc.err.CapLabel(); got != tc.want {
			t.Errorf("CapLabel() = %q, want %q", got, tc.want)
		}
	}
}
