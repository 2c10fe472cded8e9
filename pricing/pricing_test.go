package pricing_test

import (
	"os"
	"reflect"
	"testing"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

// The built-in prices reproduce the dollar figures real backends reported in
// the shared fixtures: Claude Code's total_cost_usd for claude-opus-4-8[1m]
// and claude-sonnet-4-5, and OpenRouter's billed cost for Gemini 3 Pro calls.
func TestEstimateMatchesReportedCosts(t *testing.T) {
	tests := []struct {
		name     string
		ev       budget.UsageEvent
		reported string
	}{
		// Claude Code text.json: input 1300 (+4500 cache read, +100 cache creation), output 5.
		{"claude code, claude-opus-4-8[1m]", budget.UsageEvent{Model: "claude-opus-4-8[1m]", InputTokens: 5900, CacheReadTokens: 4500, CacheWriteTokens: 100, OutputTokens: 5}, "0.0095"},
		{"claude code, claude-sonnet-4-5", budget.UsageEvent{Model: "claude-sonnet-4-5", InputTokens: 5900, CacheReadTokens: 4500, CacheWriteTokens: 100, OutputTokens: 5}, "0.0057"},
		// replay.jsonl, astropy__astropy-12907 calls 0 and 2.
		{"openrouter, google/gemini-3-pro-preview", budget.UsageEvent{Model: "google/gemini-3-pro-preview", InputTokens: 1662, OutputTokens: 106}, "0.004596"},
		{"openrouter, cached input", budget.UsageEvent{Model: "google/gemini-3-pro-preview", InputTokens: 6131, CacheReadTokens: 4058, OutputTokens: 27}, "0.0052816"},
	}
	c := pricing.Builtin()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, _ := budget.ParseUSD(tt.reported)
			got := c.Estimate(tt.ev)
			if got.CostSource != budget.CostEstimated || got.USD != want {
				t.Fatalf("estimate = %s (%s), reported %s", got.USD.Decimal(), got.CostSource, tt.reported)
			}
		})
	}
}

// Name variants match deliberately: decorations of the same model are
// stripped, but a different model is never guessed.
func TestLookupNameVariants(t *testing.T) {
	c := pricing.Builtin()
	tests := []struct {
		name, want string
	}{
		{"claude-opus-4-8", "claude-opus-4-8"},
		{"claude-opus-4-8[1m]", "claude-opus-4-8"},
		{"Claude-Opus-4-8", "claude-opus-4-8"},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"},
		{"openrouter/anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"},
		{"anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"},
		{"global.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"},
		// Regional names are billed their own (higher) price: never the global one (issue 22, item 4).
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", ""},
		{"eu.anthropic.claude-sonnet-4-5-20250929-v1:0", ""},
		{"bedrock/us-gov-west-1/anthropic.claude-sonnet-4-5-20250929-v1:0", ""},
		{"azure/eu/gpt-5", ""},
		{"claude-sonnet-4-5@20250929", "claude-sonnet-4-5"},
		{"claude-haiku-4-5-20251001", "claude-haiku-4-5"},
		{"gpt-5-2025-08-07", "gpt-5"},
		{"openai/gpt-5-mini", "gpt-5-mini"},
		{"gpt-5.5", "gpt-5.5"},
		{"google/gemini-3-pro-preview", "gemini-3-pro-preview"},
		// Unknown stays unknown: no prefix guessing.
		{"gpt-5-turbo-ultra", ""},
		{"claude-opus-9", ""},
		{"gemini-3.8-flash", ""},
		{"gpt-4o-mini-realtime", ""},
		{"", ""},
	}
	for _, tt := range tests {
		e, ok := c.Lookup(tt.name)
		if got := map[bool]string{true: e.Model}[ok]; got != tt.want {
			t.Errorf("Lookup(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
	// gpt-5-mini must not be priced as gpt-5, nor gpt-4o-mini as gpt-4o.
	mini, _ := c.Lookup("gpt-5-mini")
	full, _ := c.Lookup("gpt-5")
	if reflect.DeepEqual(mini.Price, full.Price) {
		t.Fatal("gpt-5-mini priced as gpt-5")
	}
}

func TestUnknownModelIsUnknownNotZero(t *testing.T) {
	c := pricing.Builtin()
	ev := c.Estimate(budget.UsageEvent{Model: "some-new-model", InputTokens: 100})
	if ev.CostSource != budget.CostUnknown {
		t.Fatalf("unpriced model: source %s, want unknown", ev.CostSource)
	}
	if ev := c.Estimate(budget.UsageEvent{Model: "some-new-model", IterationEnd: true}); ev.CostSource != budget.CostNone {
		t.Fatalf("event without tokens: source %s, want none", ev.CostSource)
	}
	reported := budget.UsageEvent{Model: "some-new-model", InputTokens: 100, USD: 5, CostSource: budget.CostReported}
	if got := c.Estimate(reported); got != reported {
		t.Fatalf("reported cost was re-estimated: %+v", got)
	}
	estimated := c.Estimate(budget.UsageEvent{Model: "gpt-5", InputTokens: 100})
	if again := c.Estimate(estimated); again != estimated || estimated.CostSource != budget.CostEstimated {
		t.Fatalf("an estimated cost was priced again: %+v → %+v", estimated, again)
	}
}

func TestEstimateFormula(t *testing.T) {
	p := pricing.Price{Input: pricing.PerMillion(3), Output: pricing.PerMillion(15), CacheRead: pricing.PerMillion(0.3), CacheWrite: pricing.PerMillion(3.75)}
	// (10000 − 6000 − 1000) × 3 + 6000 × 0.3 + 1000 × 3.75 + 2000 × 15, per million.
	got := p.Cost(budget.UsageEvent{InputTokens: 10_000, CacheReadTokens: 6000, CacheWriteTokens: 1000, OutputTokens: 2000})
	want, _ := budget.ParseUSD("0.04455")
	if got != want {
		t.Fatalf("cost = %s, want %s", got.Decimal(), want.Decimal())
	}
}

func TestParseLiteLLM(t *testing.T) {
	data, err := os.ReadFile("testdata/litellm_sample.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := pricing.ParseLiteLLM(data, "litellm_sample.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != 3 {
		t.Fatalf("priced %d models (%v), want 3: sample_spec and the embedding are skipped", c.Len(), c.Models())
	}
	e, ok := c.Lookup("claude-sonnet-4-5-20250929")
	if !ok || !reflect.DeepEqual(e.Price, pricing.Price{Input: 3_000_000, Output: 15_000_000, CacheRead: 300_000, CacheWrite: 3_750_000}) {
		t.Fatalf("claude-sonnet-4-5 = %+v, %v", e, ok)
	}
	// A provider-prefixed key is found under the name a backend reports.
	if _, ok := c.Lookup("openrouter/google/gemini-3-pro-preview"); !ok {
		t.Fatal("prefixed key not found by its full name")
	}
	// A missing cache price falls back to the input price.
	if e, _ := c.Lookup("my-local-model"); e.Price.CacheRead != e.Price.Input || e.Price.Input != 100_000 {
		t.Fatalf("my-local-model = %+v", e.Price)
	}
	// Overriding the built-in table.
	b := pricing.Builtin()
	b.Merge(c)
	if _, ok := b.Lookup("my-local-model"); !ok {
		t.Fatal("merge lost the file's model")
	}
}

func TestParseLiteLLMErrors(t *testing.T) {
	for name, in := range map[string]string{
		"not json":        `{"a":`,
		"not an object":   `[1,2]`,
		"nothing priced":  `{"x": {"mode": "embedding"}}`,
		"negative price":  `{"x": {"input_cost_per_token": -1, "output_cost_per_token": 1}}`,
		"string price":    `{"x": {"input_cost_per_token": "cheap", "output_cost_per_token": 1}}`,
		"absurdly costly": `{"x": {"input_cost_per_token": 1e9, "output_cost_per_token": 1}}`,
	} {
		if _, err := pricing.ParseLiteLLM([]byte(in), "f.json"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParseLiteLLM(f *testing.F) {
	if data, err := os.ReadFile("testdata/litellm_sample.json"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`{"m": {"input_cost_per_token": 1e-300, "output_cost_per_token": 1e300}}`))
	f.Add([]byte(`{"gemini-x": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}, "gemini/gemini-x": {"input_cost_per_token": 0, "output_cost_per_token": 0}, "d": {"tiered_pricing": []}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := pricing.ParseLiteLLM(data, "fuzz.json")
		if err != nil {
			return
		}
		for _, m := range c.Models() {
			e, r, ok := c.Resolve(m)
			if !ok && r.Unpriced == "" {
				// A listed model is found, or unknown for a stated reason: a
				// route's own key preferred to it that the table cannot price
				// (gemini/x at zero before a priced bare Vertex x).
				t.Fatalf("model %q listed but not found, and no reason given", m)
			}
			_ = e.Price.Cost(budget.UsageEvent{InputTokens: 1 << 20, OutputTokens: 1 << 20})
		}
	})
}

func TestCostSaturatesInsteadOfOverflowing(t *testing.T) {
	p := pricing.Price{Input: 1e12, Output: 1e12}
	got := p.Cost(budget.UsageEvent{InputTokens: 1 << 62, OutputTokens: 1 << 62})
	if got <= 0 {
		t.Fatalf("huge usage priced at %d", got)
	}
}
