package sim

import (
	"context"
	"testing"
	"time"

	"github.com/purser-dev/purser/budget"
)

// Every part is a valid event and every kind of token adds up exactly,
// whatever the remainders (issue 22 item 8: reasoning and 1-hour writes were
// dropped, and a part could hold more cache writes than input).
func TestStreamSplitsEveryKindExactly(t *testing.T) {
	ev := budget.UsageEvent{InputTokens: 1003, CacheReadTokens: 501, CacheWriteTokens: 3, CacheWrite1hTokens: 2,
		OutputTokens: 97, ReasoningTokens: 89, ServiceTier: "flex", Model: "m", USD: 1_000_003, CostSource: budget.CostReported}
	var sum budget.UsageEvent
	n := 0
	err := stream(context.Background(), ev, 50*time.Millisecond, nil, func(p budget.UsageEvent) {
		n++
		if err := p.Validate(); err != nil {
			t.Errorf("part %+v: %v", p, err)
		}
		if p.ServiceTier != "flex" || p.CostSource != budget.CostReported || p.Model != "m" {
			t.Errorf("part %+v lost the step's tier, cost source or model", p)
		}
		sum.InputTokens += p.InputTokens
		sum.CacheReadTokens += p.CacheReadTokens
		sum.CacheWriteTokens += p.CacheWriteTokens
		sum.CacheWrite1hTokens += p.CacheWrite1hTokens
		sum.OutputTokens += p.OutputTokens
		sum.ReasoningTokens += p.ReasoningTokens
		sum.USD += p.USD
	})
	if err != nil {
		t.Fatal(err)
	}
	sum.ServiceTier, sum.Model, sum.CostSource = ev.ServiceTier, ev.Model, ev.CostSource
	if n < 5 || sum != ev {
		t.Fatalf("%d parts adding up to %+v, want %+v", n, sum, ev)
	}
}
