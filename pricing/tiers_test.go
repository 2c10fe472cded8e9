package pricing_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

var versionHyphen = regexp.MustCompile(`\d-\d`)

func referenceTable(t *testing.T) *pricing.Catalogue {
	t.Helper()
	data, err := os.ReadFile("testdata/litellm_reference.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := pricing.ParseLiteLLM(data, "litellm_reference.json")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Calls on each side of each long-context threshold, a 1-hour cache write,
// service tiers and cache hits, priced to the nano-dollar from entries copied
// from LiteLLM's reference table. The whole request moves to the long-context
// rates once its input (cached tokens included) passes the threshold.
func TestPricesAsBilled(t *testing.T) {
	c := referenceTable(t)
	tests := []struct {
		name string
		ev   budget.UsageEvent
		want string
	}{
		{"sonnet 4.5 at 200k input: base rates", budget.UsageEvent{Model: "claude-sonnet-4-5", InputTokens: 200_000, OutputTokens: 1000}, "0.615"},
		{"sonnet 4.5 one token past 200k: 2× input, 1.5× output", budget.UsageEvent{Model: "claude-sonnet-4-5", InputTokens: 200_001, OutputTokens: 1000}, "1.222506"},
		{"sonnet 4.5, the issue's 300k call", budget.UsageEvent{Model: "claude-sonnet-4-5", InputTokens: 300_000, OutputTokens: 10_000}, "2.025"},
		// Issue 22, item 9: the output of a 250k request, reported apart from its input: 1.5× output.
		{"sonnet 4.5 output of a request past 200k", budget.UsageEvent{Model: "claude-sonnet-4-5", RequestInputTokens: 250_000, OutputTokens: 10_000}, "0.225"},
		{"sonnet 4.5 output of a request at 200k", budget.UsageEvent{Model: "claude-sonnet-4-5", RequestInputTokens: 200_000, OutputTokens: 10_000}, "0.15"},
		{"sonnet 4.5 cache past 200k: long-context cache prices", budget.UsageEvent{Model: "claude-sonnet-4-5", InputTokens: 250_000, CacheReadTokens: 100_000, CacheWriteTokens: 50_000}, "1.035"},
		{"sonnet 4.5 1-hour cache write: 2× input", budget.UsageEvent{Model: "claude-sonnet-4-5", InputTokens: 10_000, CacheReadTokens: 2000, CacheWriteTokens: 4000, CacheWrite1hTokens: 3000, OutputTokens: 500}, "0.04185"},
		{"sonnet 4.5 1-hour cache write past 200k", budget.UsageEvent{Model: "claude-sonnet-4-5", InputTokens: 250_000, CacheWriteTokens: 100_000, CacheWrite1hTokens: 100_000}, "2.1"},
		{"gemini 2.5 pro at 200k", budget.UsageEvent{Model: "gemini-2.5-pro", InputTokens: 200_000, OutputTokens: 1000}, "0.26"},
		{"gemini 2.5 pro past 200k", budget.UsageEvent{Model: "gemini-2.5-pro", InputTokens: 200_001, OutputTokens: 1000}, "0.5150025"},
		{"gemini 2.5 pro priority past 200k", budget.UsageEvent{Model: "gemini/gemini-2.5-pro", ServiceTier: "priority", InputTokens: 200_001, OutputTokens: 1000}, "0.5150025"},
		{"gpt-5.5 at 272k", budget.UsageEvent{Model: "gpt-5.5", InputTokens: 272_000, OutputTokens: 1000}, "1.39"},
		{"gpt-5.5 past 272k", budget.UsageEvent{Model: "gpt-5.5", InputTokens: 272_001, OutputTokens: 1000}, "2.76501"},
		{"gpt-5.5 past 272k with cached input", budget.UsageEvent{Model: "gpt-5.5", InputTokens: 272_001, CacheReadTokens: 100_000, OutputTokens: 1000}, "1.86501"},
		{"gpt-5.5 cache write past 272k: billed as long-context input", budget.UsageEvent{Model: "gpt-5.5", InputTokens: 272_001, CacheWriteTokens: 100_000}, "2.72001"},
		{"gpt-5.5 priority: 2×", budget.UsageEvent{Model: "gpt-5.5", ServiceTier: "priority", InputTokens: 10_000, CacheReadTokens: 2000, OutputTokens: 1000}, "0.142"},
		{"gpt-5.5 flex: ½", budget.UsageEvent{Model: "gpt-5.5", ServiceTier: "flex", InputTokens: 10_000, OutputTokens: 1000}, "0.04"},
		{"gpt-5.5 batch", budget.UsageEvent{Model: "gpt-5.5", ServiceTier: "batch", InputTokens: 10_000, OutputTokens: 1000}, "0.04"},
		{"gpt-5.5 standard named", budget.UsageEvent{Model: "gpt-5.5", ServiceTier: "default", InputTokens: 10_000, OutputTokens: 1000}, "0.08"},
		{"deepseek cache hit", budget.UsageEvent{Model: "deepseek-chat", InputTokens: 10_000, CacheReadTokens: 8000, OutputTokens: 1000}, "0.001204"},
		{"deepseek, only a cache-hit price", budget.UsageEvent{Model: "deepseek/deepseek-coder", InputTokens: 10_000, CacheReadTokens: 8000, OutputTokens: 1000}, "0.000672"},
		{"flex without flex rates: standard, an upper bound", budget.UsageEvent{Model: "gpt-5.1-codex-max", ServiceTier: "flex", InputTokens: 10_000, OutputTokens: 1000}, "0.0225"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := budget.ParseUSD(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			got := c.Estimate(tt.ev)
			if got.CostSource != budget.CostEstimated || got.USD != want {
				t.Fatalf("priced %s (%s), want %s; %s", got.USD.Decimal(), got.CostSource, tt.want, got.PriceSource)
			}
			if !strings.Contains(got.PriceSource, "litellm_reference.json") {
				t.Fatalf("provenance %q does not name the table", got.PriceSource)
			}
		})
	}
}

// The estimate says which rates applied.
func TestProvenanceNamesTheRates(t *testing.T) {
	c := referenceTable(t)
	long := c.Estimate(budget.UsageEvent{Model: "claude-sonnet-4-5", InputTokens: 200_001})
	if !strings.Contains(long.PriceSource, "above 200,000") || !strings.Contains(long.PriceSource, "as claude-sonnet-4-5") {
		t.Fatalf("provenance %q", long.PriceSource)
	}
	prio := c.Estimate(budget.UsageEvent{Model: "gpt-5.5", ServiceTier: "priority", InputTokens: 300_000})
	if !strings.Contains(prio.PriceSource, "priority") || !strings.Contains(prio.PriceSource, "may be low") {
		t.Fatalf("a priority call past the threshold, with no long-context priority rates, must say so: %q", prio.PriceSource)
	}
	b := pricing.Builtin().Estimate(budget.UsageEvent{Model: "gpt-5", InputTokens: 10})
	if !strings.Contains(b.PriceSource, "built-in") || !strings.Contains(b.PriceSource, pricing.BuiltinReadOn) {
		t.Fatalf("built-in provenance %q lacks the table's date", b.PriceSource)
	}
}

// A priority call on a model without priority rates would be counted low at
// standard rates: its cost is unknown, and the reason is recorded.
func TestPriorityWithoutRatesIsUnknown(t *testing.T) {
	c := referenceTable(t)
	ev := c.Estimate(budget.UsageEvent{Model: "gpt-5.1-codex-max", ServiceTier: "priority", InputTokens: 1000})
	if ev.CostSource != budget.CostUnknown || !strings.Contains(ev.PriceSource, "no priority rates") {
		t.Fatalf("got %s %s: %q", ev.USD.Decimal(), ev.CostSource, ev.PriceSource)
	}
}

// Price keys Purser does not model are named, never dropped in silence.
func TestUnknownPriceKeysAreNamed(t *testing.T) {
	c := referenceTable(t)
	all := strings.Join(c.Warnings(), "\n")
	for _, key := range []string{"input_cost_per_audio_token", "input_cost_per_audio_token_priority", "regional_processing_uplift_multiplier_eu", "search_context_cost_per_query"} {
		if !strings.Contains(all, `"`+key+`"`) {
			t.Errorf("key %s not named in warnings:\n%s", key, all)
		}
	}
	for _, key := range []string{"input_cost_per_token_above_200k_tokens_priority", "cache_creation_input_token_cost_above_1hr_above_200k_tokens", "input_cost_per_token_cache_hit", "output_cost_per_reasoning_token", `"cache_creation_input_token_cost"`} {
		if strings.Contains(all, key) {
			t.Errorf("modelled key %s reported as unknown:\n%s", key, all)
		}
	}
	c2, err := pricing.ParseLiteLLM([]byte(`{"m": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6, "output_cost_per_image_token": 4e-5}}`), "one.json")
	if err != nil {
		t.Fatal(err)
	}
	if w := c2.Warnings(); len(w) != 1 || !strings.Contains(w[0], `"output_cost_per_image_token"`) || !strings.Contains(w[0], "one.json") {
		t.Fatalf("warnings = %q", w)
	}
	if w := pricing.Builtin().Warnings(); len(w) != 0 {
		t.Fatalf("the built-in table has keys it does not model: %q", w)
	}
}

// Every built-in model resolves, under every name form a backend or a table
// writes it in; a different model is never matched.
func TestEveryBuiltinNameFormResolves(t *testing.T) {
	c := pricing.Builtin()
	provider := func(m string) string {
		switch {
		case strings.HasPrefix(m, "claude"):
			return "anthropic"
		case strings.HasPrefix(m, "gemini"):
			return "google"
		case strings.HasPrefix(m, "deepseek"):
			return "deepseek"
		}
		return "openai"
	}
	for _, m := range c.Models() {
		forms := []string{m, strings.ToUpper(m), provider(m) + "/" + m, "openrouter/" + provider(m) + "/" + m, m + "-2025-08-07"}
		switch provider(m) {
		case "anthropic":
			// OpenRouter's form: the version's first hyphen a dot (claude-3.5-haiku, claude-opus-4.1).
			dotted := m
			if loc := versionHyphen.FindStringIndex(m); loc != nil {
				dotted = m[:loc[0]+1] + "." + m[loc[0]+2:]
			}
			forms = append(forms, "anthropic/"+dotted, "openrouter/anthropic/"+dotted, "anthropic."+m+"-20250929-v1:0",
				"global.anthropic."+m+"-20250929-v1:0", m+"@20250929", m+"[1m]", "vertex_ai/"+m, "bedrock/anthropic."+m+"-v1:0")
		case "google":
			forms = append(forms, "gemini/"+m, "vertex_ai/"+m)
		case "openai":
			forms = append(forms, "azure/"+m)
		}
		for _, f := range forms {
			e, ok := c.Lookup(f)
			if !ok || e.Model != m {
				t.Errorf("Lookup(%q) = %q, %v; want %q", f, e.Model, ok, m)
			}
		}
	}
	for _, pair := range [][2]string{{"anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"}, {"anthropic/claude-haiku-4.5", "claude-haiku-4-5"},
		{"anthropic/claude-opus-4.1", "claude-opus-4-1"}, {"gpt-5-mini", "gpt-5-mini"}, {"gpt-5.1-codex-mini", "gpt-5.1-codex-mini"}} {
		if e, _ := c.Lookup(pair[0]); e.Model != pair[1] {
			t.Errorf("Lookup(%q) = %q, want %q", pair[0], e.Model, pair[1])
		}
	}
	for _, unknown := range []string{"gpt-5-mini-2", "gpt-5.3", "claude-sonnet-4-7", "gemini-3-flash", "o4-pro", "gpt-5.1-codex-ultra"} {
		if e, ok := c.Lookup(unknown); ok {
			t.Errorf("Lookup(%q) guessed %q", unknown, e.Model)
		}
	}
}

// A table that holds a model only under a decorated key (LiteLLM's
// openrouter/… and gemini/… keys) prices the bare name and other forms of it,
// preferring the shortest key (not the regional Bedrock twin).
func TestDecoratedKeysPriceBareNames(t *testing.T) {
	c, err := pricing.ParseLiteLLM([]byte(`{
		"openrouter/anthropic/claude-sonnet-4.5": {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05},
		"eu.anthropic.claude-haiku-4-5-20251001-v1:0": {"input_cost_per_token": 1.1e-06, "output_cost_per_token": 5.5e-06},
		"anthropic.claude-haiku-4-5-20251001-v1:0": {"input_cost_per_token": 1e-06, "output_cost_per_token": 5e-06},
		"gemini/gemini-2.5-pro": {"input_cost_per_token": 1.25e-06, "output_cost_per_token": 1e-05}
	}`), "f.json")
	if err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]string{
		"claude-sonnet-4-5":           "openrouter/anthropic/claude-sonnet-4.5",
		"anthropic/claude-sonnet-4.5": "openrouter/anthropic/claude-sonnet-4.5",
		"claude-sonnet-4-5-20250929":  "openrouter/anthropic/claude-sonnet-4.5",
		"claude-haiku-4-5":            "anthropic.claude-haiku-4-5-20251001-v1:0",
		"gemini-2.5-pro":              "gemini/gemini-2.5-pro",
		"google/gemini-2.5-pro":       "gemini/gemini-2.5-pro",
	} {
		e, r, ok := c.Resolve(q)
		if !ok || e.Model != want || !r.Alias {
			t.Errorf("Resolve(%q) = %q (alias %v), want %q", q, e.Model, r.Alias, want)
		}
	}
	if _, ok := c.Lookup("gemini-2.5"); ok {
		t.Error("gemini-2.5 matched a longer name")
	}
}

// Flex and batch calls past a long-context threshold are billed at the
// service tier's rates times the standard long-context multiplier (OpenAI:
// above 272k input, 2× input and 1.5× output "for standard, batch and flex"),
// and the provenance says which rule priced them. The repro: gpt-5.5,
// 300k in / 5k out, flex → $1.6125 (300k × $5/M + 5k × $22.50/M).
func TestServiceTierLongContextMultiplier(t *testing.T) {
	for _, c := range []*pricing.Catalogue{referenceTable(t), pricing.Builtin()} {
		for _, tt := range []struct {
			ev   budget.UsageEvent
			want string
		}{
			{budget.UsageEvent{Model: "gpt-5.5", ServiceTier: "flex", InputTokens: 300_000, OutputTokens: 5000}, "1.6125"},
			{budget.UsageEvent{Model: "gpt-5.5", ServiceTier: "batch", InputTokens: 300_000, OutputTokens: 5000}, "1.6125"},
			// Cache reads at flex's $0.25/M × 2.
			{budget.UsageEvent{Model: "gpt-5.5", ServiceTier: "flex", InputTokens: 300_000, CacheReadTokens: 100_000, OutputTokens: 5000}, "1.1625"},
			// At the threshold: the flex base rates.
			{budget.UsageEvent{Model: "gpt-5.5", ServiceTier: "flex", InputTokens: 272_000, OutputTokens: 1000}, "0.695"},
		} {
			got := c.Estimate(tt.ev)
			if got.CostSource != budget.CostEstimated || got.USD.Decimal() != tt.want {
				t.Errorf("%+v: %s (%s), want %s; %s", tt.ev, got.USD.Decimal(), got.CostSource, tt.want, got.PriceSource)
			}
			if tt.ev.InputTokens > 272_000 {
				if !strings.Contains(got.PriceSource, "long-context multiplier") || strings.Contains(got.PriceSource, "may be low") {
					t.Errorf("provenance does not name the rule: %q", got.PriceSource)
				}
			}
		}
	}
}
