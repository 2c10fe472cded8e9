package claude

import (
	"testing"

	"github.com/purser-dev/purser/pricing"
)

// The 1-hour part of a cache write is read where the API gives it, and is
// priced at the 1-hour rate (2× input for Sonnet 4.5, not 1.25×).
func TestOneHourCacheWritesAreReadAndPriced(t *testing.T) {
	p := NewParser()
	evs, err := p.Feed([]byte(`{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","usage":{"input_tokens":1000,` +
		`"cache_creation_input_tokens":4000,"cache_read_input_tokens":0,"output_tokens":0,"service_tier":"standard",` +
		`"cache_creation":{"ephemeral_1h_input_tokens":3000,"ephemeral_5m_input_tokens":1000}}}}`))
	if err != nil || len(evs) != 1 {
		t.Fatalf("events %v, err %v", evs, err)
	}
	ev := evs[0]
	if ev.CacheWriteTokens != 4000 || ev.CacheWrite1hTokens != 3000 || ev.ServiceTier != "standard" {
		t.Fatalf("event %+v", ev)
	}
	// 1000 × $3 + 1000 × $3.75 + 3000 × $6 per million = $0.02475.
	if got := pricing.Builtin().Estimate(ev); got.USD != 24_750_000 {
		t.Fatalf("priced %s, want 0.02475 (%s)", got.USD.Decimal(), got.PriceSource)
	}
}
