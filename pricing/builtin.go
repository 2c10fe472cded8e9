package pricing

import (
	_ "embed"
	"fmt"
)

// builtinJSON is the built-in table, in LiteLLM's own format, generated
// (pricing/cmd/genbuiltin, by go generate) from the reference that
// BuiltinReference names: for each model of builtingen.Models, the per-token
// price keys Purser models (ModelledKey), copied from the reference entry
// named for it with their values as they stand — Anthropic's and OpenAI's
// first-party entries, Gemini's gemini/ (AI Studio) entries, DeepSeek's
// deepseek/ entries. Kept out: per-query, audio and image prices, and
// OpenAI's regional-processing uplift (see README, Prices). The entries read
// are kept whole in testdata/litellm_builtin.json, and a test regenerates
// the table from them: editing builtin.json by hand fails it.
//
//go:generate go run ./cmd/genbuiltin -dir .
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
