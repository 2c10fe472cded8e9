package engine

import (
	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// degradeState is the set of degrade actions in force for one call, and why.
type degradeState struct {
	active map[purser.DegradeAction]bool
	tier   budget.Tier   // the tier that triggered them
	metric budget.Metric // the metric that put that budget in its tier
	scope  budget.Scope  // whose budget: the task's or the run's
	why    string        // a reason besides the tier (the forecast trigger's)
}

func (d degradeState) on(a purser.DegradeAction) bool { return d.active[a] }

// decideDegrade applies the policy to the budget status at this moment. An
// action staged "at: warning" waits for a metric to reach its warning line;
// the others apply on entering WARNING. Either scope (task or run) counts.
func decideDegrade(policy purser.DegradePolicy, m *budget.Manager) degradeState {
	d := degradeState{active: map[purser.DegradeAction]bool{}}
	for c := m; c != nil; c = c.Parent() {
		st := c.Status()
		if st.Tier < budget.Warning {
			continue
		}
		if d.tier < st.Tier || len(d.active) == 0 {
			d.tier, d.metric, d.scope = st.Tier, st.Cause, c.Scope()
		}
		for _, step := range policy.Steps {
			if step.At == purser.AtWarningLine && !st.PastWarningLine {
				continue
			}
			d.active[step.Action] = true
		}
	}
	return d
}
