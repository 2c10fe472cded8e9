// Package usagedelta turns the usage agent CLIs report — running totals,
// per-message snapshots that grow as a message streams, final totals that
// repeat what already streamed — into the deltas Purser records, so that
// every token lands in the ledger once, whichever source reports it first.
package usagedelta

import "github.com/purser-dev/purser/budget"

// Grow returns what the snapshot want adds to have (what was emitted so
// far), field by field and never negative, with each part kept within its
// whole: cache reads and writes within the input, reasoning within the
// output. next is have plus delta — exactly what has now been emitted, not
// the larger of the two snapshots — so a part held back by that limit (a
// cache count that grew while the input did not) can still be emitted when
// a later snapshot makes room for it, and the sum of the deltas always
// stays a valid event.
func Grow(have, want budget.UsageEvent) (delta, next budget.UsageEvent) {
	delta = budget.UsageEvent{
		InputTokens:      max(want.InputTokens-have.InputTokens, 0),
		OutputTokens:     max(want.OutputTokens-have.OutputTokens, 0),
		CacheReadTokens:  max(want.CacheReadTokens-have.CacheReadTokens, 0),
		CacheWriteTokens: max(want.CacheWriteTokens-have.CacheWriteTokens, 0),
		ReasoningTokens:  max(want.ReasoningTokens-have.ReasoningTokens, 0),
		Model:            want.Model,
		ServiceTier:      want.ServiceTier,
	}
	delta.CacheWrite1hTokens = max(want.CacheWrite1hTokens-have.CacheWrite1hTokens, 0)
	delta = within(delta)
	next = Add(have, delta)
	next.Model = want.Model
	return delta, next
}

// Add returns the token counts of a and b summed, with a's model.
func Add(a, b budget.UsageEvent) budget.UsageEvent {
	a.InputTokens += b.InputTokens
	a.OutputTokens += b.OutputTokens
	a.CacheReadTokens += b.CacheReadTokens
	a.CacheWriteTokens += b.CacheWriteTokens
	a.CacheWrite1hTokens += b.CacheWrite1hTokens
	a.ReasoningTokens += b.ReasoningTokens
	return a
}

// Min returns the smaller of a's and b's token counts, field by field, with
// a's model: a delta held within the room another source has left for it.
func Min(a, b budget.UsageEvent) budget.UsageEvent {
	a.InputTokens = min(a.InputTokens, b.InputTokens)
	a.OutputTokens = min(a.OutputTokens, b.OutputTokens)
	a.CacheReadTokens = min(a.CacheReadTokens, b.CacheReadTokens)
	a.CacheWriteTokens = min(a.CacheWriteTokens, b.CacheWriteTokens)
	a.CacheWrite1hTokens = min(a.CacheWrite1hTokens, b.CacheWrite1hTokens, a.CacheWriteTokens)
	a.ReasoningTokens = min(a.ReasoningTokens, b.ReasoningTokens)
	return a
}

// within keeps each part of ev within its whole: cache reads and writes
// within the input, 1-hour writes within the writes, reasoning within the
// output.
func within(ev budget.UsageEvent) budget.UsageEvent {
	ev.CacheReadTokens = min(ev.CacheReadTokens, ev.InputTokens)
	ev.CacheWriteTokens = min(ev.CacheWriteTokens, ev.InputTokens-ev.CacheReadTokens)
	ev.CacheWrite1hTokens = min(ev.CacheWrite1hTokens, ev.CacheWriteTokens)
	ev.ReasoningTokens = min(ev.ReasoningTokens, ev.OutputTokens)
	return ev
}
