package pricing

import (
	_ "embed"
	"fmt"
)

// BuiltinReadOn is the date the built-in prices were read.
const BuiltinReadOn = "2026-11-23"

// BuiltinReference is where the built-in prices were read: LiteLLM's
// reference table at the commit read.
const BuiltinReference = "BerriAI/litellm model_prices_and_context_window.json @00035b69f416"

// builtinJSON is the built-in table, in LiteLLM's own format: each entry is
// the reference entry's price keys, copied as they stand, for the first-party
// model name (Gemini's from the gemini/ keys). Kept out: per-query, audio and
// image prices, and OpenAI's regional-processing uplift (see README, Prices).
// Exceptions, noted here because JSON cannot carry comments:
//   - claude-opus-4-8 is not in the reference read; it carries Opus 4.7's
//     prices, which reproduce Claude Code's own total_cost_usd on the
//     captured fixtures to the nano-dollar.
//   - claude-sonnet-4 is keyed claude-4-sonnet-20250514 in the reference.
//   - gpt-4o-2024-05-13 is here because its price ($5/$15) is not gpt-4o's
//     ($2.50/$10): a dated name resolves to its undated model unless the
//     table holds the dated key (issue 22, item 4). Its input and output
//     prices are the reference's as quoted by several independent copies;
//     the whole reference file was not on hand to copy the entry's other
//     keys (it has no cache pricing).
//   - claude-3-5-haiku, gpt-5-mini, gpt-5-nano, gpt-4.1, gpt-4.1-mini,
//     gpt-4o, o3, o3-mini, o4-mini, gemini-2.5-flash and -flash-lite keep the
//     figures of the previous table, which equalled the reference's base
//     prices (their tier keys were not re-read).
//
//go:embed builtin.json
var builtinJSON []byte

// builtinSource labels every built-in estimate.
var builtinSource = fmt.Sprintf("built-in prices (%s, read %s)", BuiltinReference, BuiltinReadOn)

var builtinTable = func() *Catalogue {
	c, err := ParseLiteLLM(builtinJSON, builtinSource)
	if err != nil {
		panic(fmt.Sprintf("pricing: the built-in table does not parse: %v", err)) // a build defect, caught by every test
	}
	return c
}()

// Builtin returns a new catalogue of today's main Anthropic, OpenAI and
// Google models (and DeepSeek's), priced as read on BuiltinReadOn.
func Builtin() *Catalogue {
	c := New()
	c.Merge(builtinTable)
	return c
}
