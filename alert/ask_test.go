package alert

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser/budget"
)

// A BLOCKED task's alert asks for what one more iteration at its average
// would take, rounded up to a cent, with the command that raises it; other
// alerts ask nothing.
func TestAlertAsksForARaise(t *testing.T) {
	blocked := func(m budget.Metric, st budget.Status) Alert {
		return Alert{Kind: Blocked, Scope: budget.ScopeTask, TaskID: "t", Metric: m, Status: st}
	}
	for _, tc := range []struct {
		name string
		a    Alert
		want string
	}{
		{"money", blocked(budget.Money, budget.Status{UsedUSD: budget.USD(1_200_000_001), USDSource: budget.SourceReported, UsedIterations: 2}),
			"+$0.61 (one more iteration at its average) would likely finish it: purser raise t --usd 1.81"},
		{"tokens", blocked(budget.Tokens, budget.Status{UsedTokens: 1001, UsedIterations: 2}),
			"+501 tokens (one more iteration at its average) would likely finish it: purser raise t --tokens 1502"},
		{"unknown dollars", blocked(budget.Money, budget.Status{USDSource: budget.SourceUnknown, UsedIterations: 2}), ""},
		{"iterations", blocked(budget.Iterations, budget.Status{UsedIterations: 2}), ""},
		{"a warning", Alert{Kind: Warning, Scope: budget.ScopeTask, TaskID: "t", Metric: budget.Money, Status: budget.Status{UsedUSD: 5, UsedIterations: 1}}, ""},
	} {
		if got := tc.a.Ask(); got != tc.want {
			t.Errorf("%s: Ask() = %q, want %q", tc.name, got, tc.want)
		}
		if tc.want != "" && !strings.HasSuffix(tc.a.Text(), ". Ask: "+tc.want) {
			t.Errorf("%s: the alert's text does not end with its ask: %q", tc.name, tc.a.Text())
		}
	}
}
