package pricing_test

import (
	"os"
	"strings"
	"testing"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

// routesTable is the built-in table with litellm_routes.json over it, as
// `purser prices --pricing FILE` and `pricing:` load a file.
func routesTable(t *testing.T) *pricing.Catalogue {
	t.Helper()
	data, err := os.ReadFile("testdata/litellm_routes.json")
	if err != nil {
		t.Fatal(err)
	}
	file, err := pricing.ParseLiteLLM(data, "litellm_routes.json")
	if err != nil {
		t.Fatal(err)
	}
	c := pricing.Builtin()
	c.Merge(file)
	return c
}

// An OpenRouter id resolves to LiteLLM's OpenRouter entry, not to the
// shortest key of the same bare name (issue 22, item 1): the repro,
// qwen/qwen3-235b-a22b-thinking-2507 at 10k in / 1k out, is $0.0017 through
// OpenRouter, not $110.
func TestOpenRouterIDsResolveToOpenRouterEntries(t *testing.T) {
	c := routesTable(t)
	for _, tt := range []struct {
		model string
		route pricing.Route
		key   string
		usd   string
	}{
		{"qwen/qwen3-235b-a22b-thinking-2507", pricing.RouteUnknown, "openrouter/qwen/qwen3-235b-a22b-thinking-2507", "0.0017"},
		{"qwen/qwen3-235b-a22b-thinking-2507", pricing.RouteOpenRouter, "openrouter/qwen/qwen3-235b-a22b-thinking-2507", "0.0017"},
		{"qwen3-235b-a22b-thinking-2507", pricing.RouteOf("https://openrouter.ai/api/v1"), "openrouter/qwen/qwen3-235b-a22b-thinking-2507", ""},
		{"z-ai/glm-4.7-flash", pricing.RouteUnknown, "openrouter/z-ai/glm-4.7-flash", "0.0011"},
		{"openrouter/z-ai/glm-4.7-flash", pricing.RouteUnknown, "openrouter/z-ai/glm-4.7-flash", "0.0011"},
		// A maker's model through OpenRouter: the maker's price when LiteLLM has no OpenRouter key.
		{"anthropic/claude-sonnet-4.5", pricing.RouteOpenRouter, "claude-sonnet-4-5", ""},
		{"google/gemini-2.5-pro", pricing.RouteOpenRouter, "gemini/gemini-2.5-pro", ""},
	} {
		e, r, ok := c.ResolveRoute(tt.model, tt.route)
		if !ok || e.Model != tt.key {
			t.Errorf("ResolveRoute(%q, %q) = %q, %v (tried %v), want %q", tt.model, tt.route, e.Model, ok, r.Tried, tt.key)
			continue
		}
		if tt.usd == "" || tt.route != pricing.RouteUnknown {
			continue
		}
		got := c.Estimate(budget.UsageEvent{Model: tt.model, InputTokens: 10_000, OutputTokens: 1000})
		if got.CostSource != budget.CostEstimated || got.USD.Decimal() != tt.usd {
			t.Errorf("%s: %s (%s), want $%s; %s", tt.model, got.USD.Decimal(), got.CostSource, tt.usd, got.PriceSource)
		}
	}
	// Through OpenRouter, a bare name with no OpenRouter key is not priced at
	// another host's key.
	if e, _, ok := c.ResolveRoute("qwen3-235b-a22b-thinking-2507-x", pricing.RouteOpenRouter); ok {
		t.Errorf("guessed %q", e.Model)
	}
	if e, _, ok := c.ResolveRoute("together_ai/qwen3-235b-a22b-thinking-2507", pricing.RouteUnknown); !ok || e.Model != "together_ai/qwen3-235b-a22b-thinking-2507" {
		t.Errorf("a host's own key must still price its own name: %q", e.Model)
	}
	// A host that sets its own prices never lends them to the bare name, and
	// a name through it is never priced at the maker's list price.
	if e, _, _ := c.ResolveRoute("qwen3-235b-a22b-thinking-2507", pricing.RouteUnknown); e.Model == "together_ai/qwen3-235b-a22b-thinking-2507" {
		t.Errorf("the bare name priced as %q", e.Model)
	}
	for _, m := range []string{"together_ai/claude-sonnet-4-5", "groq/deepseek-chat", "github_copilot/gpt-5"} {
		if e, ok := pricing.Builtin().Lookup(m); ok {
			t.Errorf("%s priced at the maker's rates (%s)", m, e.Model)
		}
	}
}

// A zero price from a table is never an estimate for a model not marked
// free: it is unknown, and the reason says so (issue 22, item 1). A model
// marked free (":free", OpenRouter's free router) is priced at zero.
func TestZeroPriceIsUnknownUnlessMarkedFree(t *testing.T) {
	c := routesTable(t)
	got := c.Estimate(budget.UsageEvent{Model: "zai/glm-4.7-flash", InputTokens: 10_000, OutputTokens: 1000})
	if got.CostSource != budget.CostUnknown || !strings.Contains(got.PriceSource, "zero") || !strings.Contains(got.PriceSource, "free") {
		t.Errorf("zero-priced, not marked free: %s (%s) %q", got.USD.Decimal(), got.CostSource, got.PriceSource)
	}
	_, r, ok := c.Resolve("glm-4.7-flash")
	if ok && r.Key == "zai/glm-4.7-flash" {
		t.Errorf("glm-4.7-flash priced by the zero entry")
	}
	free := c.Estimate(budget.UsageEvent{Model: "openrouter/openrouter/free", InputTokens: 10_000, OutputTokens: 1000})
	if free.CostSource != budget.CostEstimated || free.USD != 0 {
		t.Errorf("a model marked free: %s (%s) %q", free.USD.Decimal(), free.CostSource, free.PriceSource)
	}
}

// Regional and dated names with their own price get that price, or are
// unknown: never a cheaper sibling's (issue 22, item 4).
func TestRegionalAndDatedNamesKeepTheirOwnPrice(t *testing.T) {
	b := pricing.Builtin()
	// gpt-4o-2024-05-13 is $5/$15, not gpt-4o's $2.50/$10.
	got := b.Estimate(budget.UsageEvent{Model: "gpt-4o-2024-05-13", InputTokens: 1_000_000, OutputTokens: 1_000_000})
	if got.USD.Decimal() != "20" {
		t.Errorf("gpt-4o-2024-05-13: %s; %s", got.USD.Decimal(), got.PriceSource)
	}
	for _, m := range []string{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "eu.anthropic.claude-sonnet-4-5-20250929-v1:0",
		"apac.anthropic.claude-haiku-4-5-20251001-v1:0", "bedrock/us-gov-west-1/anthropic.claude-sonnet-4-5-20250929-v1:0",
		"bedrock/us-gov-east-1/claude-sonnet-4-5", "azure/eu/gpt-5", "azure/us/gpt-5-mini", "vertex_ai/europe-west4/gemini-2.5-pro"} {
		if e, ok := b.Lookup(m); ok {
			t.Errorf("built-in: %s priced as %s (first-party rates)", m, e.Model)
		}
	}
	c := routesTable(t)
	us := c.Estimate(budget.UsageEvent{Model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0", InputTokens: 1_000_000})
	if us.USD.Decimal() != "3.3" {
		t.Errorf("us. Bedrock with its own entry: %s; %s", us.USD.Decimal(), us.PriceSource)
	}
	g := c.Estimate(budget.UsageEvent{Model: "global.anthropic.claude-sonnet-4-5-20250929-v1:0", InputTokens: 100_000})
	if g.USD.Decimal() != "0.3" {
		t.Errorf("global. Bedrock: %s; %s", g.USD.Decimal(), g.PriceSource)
	}
}

// With a file, a bare Gemini name is Google AI Studio's (gemini/…), not
// LiteLLM's bare Vertex entry, unless the route is Vertex; and a priority
// long-context cell without a cache-read price bills the long-context cache
// read (issue 22, item 5).
func TestBareGeminiNamesAreAIStudios(t *testing.T) {
	c := routesTable(t)
	flash := c.Estimate(budget.UsageEvent{Model: "gemini-2.0-flash-001", InputTokens: 1_000_000, OutputTokens: 1_000_000})
	if flash.USD.Decimal() != "0.5" || !strings.Contains(flash.PriceSource, "gemini/gemini-2.0-flash-001") {
		t.Errorf("gemini-2.0-flash-001: %s; %s", flash.USD.Decimal(), flash.PriceSource)
	}
	vertex := c.EstimateRoute(budget.UsageEvent{Model: "gemini-2.0-flash-001", InputTokens: 1_000_000, OutputTokens: 1_000_000}, pricing.RouteVertex)
	if vertex.USD.Decimal() != "0.75" {
		t.Errorf("gemini-2.0-flash-001 through Vertex: %s; %s", vertex.USD.Decimal(), vertex.PriceSource)
	}
	if r := pricing.RouteOf("https://us-central1-aiplatform.googleapis.com"); r != pricing.RouteVertex {
		t.Errorf("RouteOf(Vertex) = %q", r)
	}
	// The repro: 250k in, 100k of them cached, 3k out, priority.
	prio := c.Estimate(budget.UsageEvent{Model: "gemini-2.5-pro", ServiceTier: "priority", InputTokens: 250_000, CacheReadTokens: 100_000, OutputTokens: 3000})
	if prio.CostSource != budget.CostEstimated || prio.USD.Decimal() != "0.445" {
		t.Errorf("gemini-2.5-pro priority, long context: %s (%s); %s", prio.USD.Decimal(), prio.CostSource, prio.PriceSource)
	}
	ref := referenceTable(t).Estimate(budget.UsageEvent{Model: "gemini-2.5-pro", ServiceTier: "priority", InputTokens: 250_000, CacheReadTokens: 100_000, OutputTokens: 3000})
	if ref.USD.Decimal() != "0.445" {
		t.Errorf("reference table: %s; %s", ref.USD.Decimal(), ref.PriceSource)
	}
}

// Entries priced only by tiered_pricing, per-second or per-character keys
// are named in the warnings as the other unmodelled keys are, and a lookup
// says why the model is unknown instead of "no such entry" (issue 22, item 6).
func TestUnmodelledOnlyEntriesAreNamed(t *testing.T) {
	c := routesTable(t)
	all := strings.Join(c.Warnings(), "\n")
	for _, key := range []string{"tiered_pricing", "input_cost_per_second", "output_cost_per_second", "input_cost_per_character"} {
		if !strings.Contains(all, `"`+key+`"`) {
			t.Errorf("key %s not named:\n%s", key, all)
		}
	}
	if strings.Contains(all, "text-embedding-like") {
		t.Errorf("an embedding entry named:\n%s", all)
	}
	for model, key := range map[string]string{"dashscope/qwen3-max": "tiered_pricing",
		"vertex_ai/chirp-like-per-second": "input_cost_per_second", "vertex_ai/chat-bison-like-per-character": "input_cost_per_character"} {
		_, r, ok := c.Resolve(model)
		if ok || !strings.Contains(r.Unpriced, key) {
			t.Errorf("Resolve(%q): ok %v, unpriced %q", model, ok, r.Unpriced)
		}
		ev := c.Estimate(budget.UsageEvent{Model: model, InputTokens: 10})
		if ev.CostSource != budget.CostUnknown || !strings.Contains(ev.PriceSource, key) {
			t.Errorf("Estimate(%q): %s %q", model, ev.CostSource, ev.PriceSource)
		}
	}
	// A priced entry that also carries tiered_pricing: priced, the key named.
	p, err := pricing.ParseLiteLLM([]byte(`{"m": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6, "tiered_pricing": [{"range": [0, 1000], "input_cost_per_token": 1e-6}]}}`), "t.json")
	if err != nil {
		t.Fatal(err)
	}
	if w := p.Warnings(); len(w) != 1 || !strings.Contains(w[0], `"tiered_pricing"`) {
		t.Errorf("warnings = %q", w)
	}
}
