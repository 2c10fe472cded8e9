package alert

import (
	"fmt"

	"github.com/purser-dev/purser/budget"
)

// centNanos is a cent in nano-dollars: an ask is rounded up to cents.
const centNanos = budget.NanosPerDollar / 100

// Ask is what an alert asks of a person, when a raise could let a task go
// on: for a task BLOCKED on money or tokens, one more iteration at its
// average so far — what a raise would likely take — and the command that
// makes it, from outside the task's box. "" when there is nothing to ask
// (another metric, a run's budget, no iteration to average).
func (a Alert) Ask() string {
	st := a.Status
	if a.Kind != Blocked || a.Scope != budget.ScopeTask || st.UsedIterations <= 0 {
		return ""
	}
	n := int64(st.UsedIterations)
	switch a.Metric {
	case budget.Money:
		if st.USDSource == budget.SourceUnknown || st.UsedUSD <= 0 {
			return ""
		}
		used := int64(st.UsedUSD)
		to := ceilCents(used + (used+n-1)/n)
		return fmt.Sprintf("+%s (one more iteration at its average) would likely finish it: purser raise %s --usd %s",
			budget.USD(ceilCents(to-used)), a.TaskID, budget.USD(to).Decimal())
	case budget.Tokens:
		if st.UsedTokens <= 0 {
			return ""
		}
		more := (st.UsedTokens + n - 1) / n
		return fmt.Sprintf("+%d tokens (one more iteration at its average) would likely finish it: purser raise %s --tokens %d", more, a.TaskID, st.UsedTokens+more)
	}
	return ""
}

// ceilCents rounds nano-dollars up to a whole cent.
func ceilCents(nanos int64) int64 { return (nanos + centNanos - 1) / centNanos * centNanos }
