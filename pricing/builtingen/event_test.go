package builtingen_test

import "github.com/purser-dev/purser/budget"

func budgetEvent(model, tier string, in, cached, write, write1h, out int64) budget.UsageEvent {
	return budget.UsageEvent{Model: model, ServiceTier: tier, InputTokens: in, CacheReadTokens: cached,
		CacheWriteTokens: write, CacheWrite1hTokens: write1h, OutputTokens: out}
}
