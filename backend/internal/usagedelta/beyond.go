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

// Sum sums events into one under model (or the first event's model); nil
// for none.
func Sum(evs []budget.UsageEvent, model string) []budget.UsageEvent {
	if len(evs) == 0 {
		return nil
	}
	if model == "" {
		model = evs[0].Model
	}
	var sum budget.UsageEvent
	for _, ev := range evs {
		sum = Add(sum, ev)
	}
	sum.Model = model
	return []budget.UsageEvent{sum}
}

// Most returns, per model, the larger of what two records of the same
// replies hold, field by field (a CLI's session file and Purser's wire
// journal: the journal also holds replies the CLI died holding, the file
// what went past the wire unmetered). One event per model, in model order.
func Most(a, b []budget.UsageEvent) []budget.UsageEvent {
	sum := func(evs []budget.UsageEvent) map[string]budget.UsageEvent {
		out := map[string]budget.UsageEvent{}
		for _, ev := range evs {
			s := Add(out[ev.Model], ev)
			s.Model = ev.Model
			if s.ServiceTier == "" {
				s.ServiceTier = ev.ServiceTier
			}
			out[ev.Model] = s
		}
		return out
	}
	sa, sb := sum(a), sum(b)
	for m, y := range sb {
		x, ok := sa[m]
		if !ok {
			sa[m] = y
			continue
		}
		x.InputTokens = max(x.InputTokens, y.InputTokens)
		x.OutputTokens = max(x.OutputTokens, y.OutputTokens)
		x.CacheReadTokens = max(x.CacheReadTokens, y.CacheReadTokens)
		x.CacheWriteTokens = max(x.CacheWriteTokens, y.CacheWriteTokens)
		x.CacheWrite1hTokens = max(x.CacheWrite1hTokens, y.CacheWrite1hTokens)
		x.ReasoningTokens = max(x.ReasoningTokens, y.ReasoningTokens)
		sa[m] = within(x)
	}
	models := make([]string, 0, len(sa))
	for m := range sa {
		models = append(models, m)
	}
	sort.Strings(models)
	out := make([]budget.UsageEvent, 0, len(models))
	for _, m := range models {
		out = append(out, sa[m])
	}
	return out
}
