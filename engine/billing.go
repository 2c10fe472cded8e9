package engine

import "github.com/purser-dev/purser/budget"

// asBilled labels an event's dollars as its backend bills them. On a
// flat-rate plan (billing: subscription) a reported or estimated cost is a
// list price: labelled budget.CostList, recorded and shown, never summed into
// money spent nor checked against a money cap. Unknown stays unknown.
func (t *taskRun) asBilled(ev budget.UsageEvent) budget.UsageEvent {
	if t.task.Backend.Subscription() && (ev.CostSource == budget.CostReported || ev.CostSource == budget.CostEstimated) {
		ev.CostSource = budget.CostList
	}
	return ev
}

// callMaxUSD is what is left under the money caps of the task, its run and
// the named budgets it draws from, this call's own reservation included, for a backend's own spending fence
// (CallRequest.MaxUSD); 0 where money is not capped. A backend on a flat-rate
// plan gets none: a fence counting list prices would stop a user on a plan by
// phantom dollars.
func (t *taskRun) callMaxUSD(reserved budget.USD) budget.USD {
	if t.task.Backend.Subscription() {
		return 0
	}
	avail := t.budget.Available()
	room := budget.UnlimitedUSD
	if avail.USD != budget.UnlimitedUSD {
		room = avail.USD + reserved
	}
	// Named budgets' room was measured before this call's hold.
	room = min(room, t.namedRoom)
	if room == budget.UnlimitedUSD {
		return 0
	}
	// 0 would mean no fence: a budget with nothing left fences at the least.
	return max(room, 1)
}
