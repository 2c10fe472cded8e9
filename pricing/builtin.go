package pricing

// BuiltinReadOn is the date the built-in prices were read.
const BuiltinReadOn = "2026-11-22"

// builtin rows are dollars per million tokens: input, output, cache read,
// cache write. Providers without a cache-write charge (OpenAI, Google) price
// cache writes as plain input. Long-context surcharges (Gemini over 200k,
// GPT over 272k) are not modelled: such calls are estimated low, which the
// estimate-vs-reported difference in BUDGET.md shows where a backend reports.
var builtin = []struct {
	model                  string
	in, out, cRead, cWrite float64
	note                   string
}{
	// Anthropic. claude-opus-4-8 and claude-sonnet-4-5 reproduce Claude Code's
	// own total_cost_usd on the captured fixtures to the cent fraction.
	{"claude-opus-4-8", 5, 25, 0.5, 6.25, "anthropic list price; matches Claude Code's reported cost"},
	{"claude-opus-4-7", 5, 25, 0.5, 6.25, "anthropic list price"},
	{"claude-opus-4-6", 5, 25, 0.5, 6.25, "anthropic list price"},
	{"claude-opus-4-5", 5, 25, 0.5, 6.25, "anthropic list price"},
	{"claude-opus-4-1", 15, 75, 1.5, 18.75, "anthropic list price"},
	{"claude-opus-4", 15, 75, 1.5, 18.75, "anthropic list price"},
	{"claude-sonnet-4-6", 3, 15, 0.3, 3.75, "anthropic list price"},
	{"claude-sonnet-4-5", 3, 15, 0.3, 3.75, "anthropic list price; matches Claude Code's reported cost"},
	{"claude-sonnet-4", 3, 15, 0.3, 3.75, "anthropic list price"},
	{"claude-haiku-4-5", 1, 5, 0.1, 1.25, "anthropic list price"},
	{"claude-3-5-haiku", 0.8, 4, 0.08, 1, "anthropic list price"},
	// OpenAI.
	{"gpt-5.5", 5, 30, 0.5, 5, "openai list price"},
	{"gpt-5.4", 2.5, 15, 0.25, 2.5, "openai list price"},
	{"gpt-5.4-mini", 0.75, 4.5, 0.075, 0.75, "openai list price"},
	{"gpt-5", 1.25, 10, 0.125, 1.25, "openai list price"},
	{"gpt-5-codex", 1.25, 10, 0.125, 1.25, "openai list price"},
	{"gpt-5-mini", 0.25, 2, 0.025, 0.25, "openai list price"},
	{"gpt-5-nano", 0.05, 0.4, 0.005, 0.05, "openai list price"},
	{"gpt-4.1", 2, 8, 0.5, 2, "openai list price"},
	{"gpt-4.1-mini", 0.4, 1.6, 0.1, 0.4, "openai list price"},
	{"gpt-4o", 2.5, 10, 1.25, 2.5, "openai list price"},
	{"gpt-4o-mini", 0.15, 0.6, 0.075, 0.15, "openai list price"},
	{"o3", 2, 8, 0.5, 2, "openai list price"},
	{"o4-mini", 1.1, 4.4, 0.275, 1.1, "openai list price"},
	// Google. gemini-3-pro-preview reproduces the OpenRouter-billed cost of
	// the calls in the shared replay corpus.
	{"gemini-3-pro-preview", 2, 12, 0.2, 2, "google list price (up to 200k context); matches billed costs in the replay corpus"},
	{"gemini-2.5-pro", 1.25, 10, 0.125, 1.25, "google list price (up to 200k context)"},
	{"gemini-2.5-flash", 0.3, 2.5, 0.03, 0.3, "google list price"},
	{"gemini-2.5-flash-lite", 0.1, 0.4, 0.01, 0.1, "google list price"},
}

// Builtin returns a new catalogue of today's main Anthropic, OpenAI and
// Google models, priced as read on BuiltinReadOn.
func Builtin() *Catalogue {
	c := New()
	for _, b := range builtin {
		c.Set(Entry{
			Model:  b.model,
			Price:  Price{Input: PerMillion(b.in), Output: PerMillion(b.out), CacheRead: PerMillion(b.cRead), CacheWrite: PerMillion(b.cWrite)},
			Source: "built-in, " + b.note + ", read " + BuiltinReadOn,
		})
	}
	return c
}
