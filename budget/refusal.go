package budget

import "fmt"

// CapLabel names the cap that refused work the way a budget config writes
// it, for the refusal an agent reads at Purser's door: "hard usd $1.00",
// "run hard tokens 17000", `named "team" hard usd $5.00`.
func (e *BudgetExhaustedError) CapLabel() string {
	key := e.Metric.String()
	if e.Metric == Money {
		key = "usd"
	}
	label := fmt.Sprintf("hard %s %s", key, e.Metric.Format(e.Limit))
	switch e.Scope {
	case ScopeRun:
		return "run " + label
	case ScopeNamed:
		return fmt.Sprintf("named %q %s", e.Name, label)
	}
	return label
}
