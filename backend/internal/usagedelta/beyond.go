package usagedelta

import (
	"sort"

	"github.com/purser-dev/purser/budget"
)

// Beyond returns what the usage a CLI's session file holds for a call
// (file: its events, in any number per model) adds to what the ledger
// recorded for it (recorded: per model), one event per model with anything
// new, field by field and never negative, in model order.
func Beyond(recorded, file []budget.UsageEvent) []budget.UsageEvent {
	have := map[string]budget.UsageEvent{}
	for _, r := range recorded {
		have[r.Model] = Add(have[r.Model], r)
	}
	want := map[string]budget.UsageEvent{}
	for _, f := range file {
		w := Add(want[f.Model], f)
		w.Model, w.ServiceTier = f.Model, f.ServiceTier
		want[f.Model] = w
	}
	models := make([]string, 0, len(want))
	for m := range want {
		models = append(models, m)
	}
	sort.Strings(models)
	var out []budget.UsageEvent
	for _, m := range models {
		delta, _ := Grow(have[m], want[m])
		if delta.Tokens() > 0 {
			out = append(out, delta)
		}
	}
	return out
}
