package budget_test

import (
	"testing"

	"github.com/purser-dev/purser/budget"
)

// HoldWarning puts a budget in WARNING by money, tells its listeners once,
// and leaves HARD to the spend.
func TestHoldWarning(t *testing.T) {
	hard := budget.Dollars(1)
	m, err := budget.NewManager(budget.Config{Hard: budget.HardLimits{USD: &hard, MaxIterations: ptr(3)}}, budget.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var changes []budget.Change
	defer m.OnChange(func(c budget.Change) { changes = append(changes, c) })()
	if m.WarningHeld() || m.Tier() != budget.Optimal {
		t.Fatalf("a fresh budget is held in WARNING, or not OPTIMAL: %s", m.Tier())
	}
	if got := m.HoldWarning(budget.Money); got != budget.Warning {
		t.Fatalf("HoldWarning = %s, want WARNING", got)
	}
	m.HoldWarning(budget.Money) // again: no second change
	st := m.Status()
	if st.Tier != budget.Warning || st.Cause != budget.Money || !st.IsInWarning || !m.WarningHeld() || !m.ShouldApplyDegrade() {
		t.Errorf("held: tier %s by %s, in warning %v, held %v, degrade %v; want WARNING by money", st.Tier, st.Cause, st.IsInWarning, m.WarningHeld(), m.ShouldApplyDegrade())
	}
	if len(changes) != 1 || changes[0].From != budget.Optimal || changes[0].To != budget.Warning {
		t.Fatalf("changes %+v, want one OPTIMAL → WARNING", changes)
	}
	if m.Check() != nil {
		t.Fatal("a held WARNING stops the task")
	}
	m.RecordUsage(budget.UsageEvent{USD: hard, CostSource: budget.CostReported})
	if m.Tier() != budget.Hard || m.Check() == nil || m.WarningHeld() {
		t.Errorf("at the cap: tier %s, check %v, held %v; want HARD, stopped, not held alone", m.Tier(), m.Check(), m.WarningHeld())
	}
}

// A WARNING the tokens forecast put the budget in says tokens, not money.
func TestHoldWarningSaysItsMetric(t *testing.T) {
	m, err := budget.NewManager(budget.Config{Hard: budget.HardLimits{Tokens: ptr(int64(1000)), MaxIterations: ptr(3)}}, budget.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.HoldWarning(budget.Tokens)
	m.HoldWarning(budget.Money) // the first held is kept
	if st := m.Status(); st.Tier != budget.Warning || st.Cause != budget.Tokens {
		t.Fatalf("held by the tokens forecast: tier %s by %s, want WARNING by tokens", st.Tier, st.Cause)
	}
}
