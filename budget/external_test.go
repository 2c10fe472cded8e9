package budget

import (
	"errors"
	"testing"
)

// A run shared by processes is judged on everyone's spend: what others
// spent moves its tier, shrinks what a call may reserve, and a HARD reached
// by others tells the listeners at once.
func TestSetExternalCountsOthersSpend(t *testing.T) {
	hard := int64(1000)
	iters := 10
	cfg := Config{Hard: HardLimits{Tokens: &hard, MaxIterations: &iters}}
	m, err := NewManager(cfg, Options{Scope: ScopeRun})
	if err != nil {
		t.Fatal(err)
	}
	m.RecordUsage(UsageEvent{InputTokens: 300})
	var changes []Change
	defer m.OnChange(func(c Change) { changes = append(changes, c) })()

	if got := m.SetExternal(Totals{Tokens: 400}); got != Optimal {
		t.Fatalf("700 of 1000 tokens with no optimal line: tier %s", got)
	}
	if got := m.Available().Tokens; got != 300 {
		t.Fatalf("available after 300 here and 400 elsewhere: %d, want 300", got)
	}
	if got := m.Status().UsedTokens; got != 700 {
		t.Fatalf("status counts %d tokens, want 700", got)
	}
	// A stale, smaller reading is a lower bound already exceeded: ignored.
	m.SetExternal(Totals{Tokens: 100})
	if got := m.Totals().Tokens; got != 700 {
		t.Fatalf("a smaller reading took spend back: %d, want 700", got)
	}
	if got := m.SetExternal(Totals{Tokens: 700}); got != Hard {
		t.Fatalf("1000 of 1000 tokens: tier %s, want HARD", got)
	}
	if len(changes) != 1 || changes[0].To != Hard {
		t.Fatalf("listeners told %+v, want one change to HARD", changes)
	}
	var be *BudgetExhaustedError
	if _, err := m.Reserve(Amount{Tokens: 1}); !errors.As(err, &be) {
		t.Fatalf("reserve at the hard cap reached by others: %v, want BudgetExhaustedError", err)
	}
}
