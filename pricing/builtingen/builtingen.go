// Package builtingen makes Purser's built-in price table (pricing/builtin.json
// and the constants that cite its source) from LiteLLM's reference file,
// model_prices_and_context_window.json: each built-in model's per-token
// price keys copied from the reference entry named for it, values as they
// stand, nothing typed by hand. pricing/cmd/genbuiltin runs it; a test
// regenerates the table from the copy kept in pricing/testdata and fails
// when the committed table is not what the reference gives.
package builtingen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/format"
	"sort"

	"github.com/purser-dev/purser/pricing"
)

// Model is one model of the built-in table: the name agents send (the key
// it has in builtin.json) and the reference entry it is read from.
type Model struct {
	Name string
	Key  string
}

// Models are the built-in table's models, in its order: Anthropic's and
// OpenAI's first-party names (their reference entries are keyed by them),
// Google AI Studio's Gemini names (read from the reference's gemini/ keys,
// as Gemini CLI calls AI Studio) and DeepSeek's (from its deepseek/ keys,
// which alone carry its cache-hit price). A name the reference has no
// undated entry for is read from its dated one.
var Models = []Model{
	{"claude-fable-5", "claude-fable-5"},
	{"claude-opus-4-8", "claude-opus-4-8"},
	{"claude-opus-4-7", "claude-opus-4-7"},
	{"claude-opus-4-6", "claude-opus-4-6"},
	{"claude-opus-4-5", "claude-opus-4-5"},
	{"claude-opus-4-1", "claude-opus-4-1"},
	{"claude-opus-4", "claude-opus-4-20250514"},
	{"claude-sonnet-5", "claude-sonnet-5"},
	{"claude-sonnet-4-6", "claude-sonnet-4-6"},
	{"claude-sonnet-4-5", "claude-sonnet-4-5"},
	{"claude-sonnet-4", "claude-sonnet-4-20250514"},
	{"claude-haiku-4-5", "claude-haiku-4-5"},
	{"gpt-5.6", "gpt-5.6"},
	{"gpt-5.6-sol", "gpt-5.6-sol"},
	{"gpt-5.6-terra", "gpt-5.6-terra"},
	{"gpt-5.6-luna", "gpt-5.6-luna"},
	{"gpt-5.5", "gpt-5.5"},
	{"gpt-5.5-pro", "gpt-5.5-pro"},
	{"gpt-5.4", "gpt-5.4"},
	{"gpt-5.4-pro", "gpt-5.4-pro"},
	{"gpt-5.4-mini", "gpt-5.4-mini"},
	{"gpt-5.4-nano", "gpt-5.4-nano"},
	{"gpt-5.3-codex", "gpt-5.3-codex"},
	{"gpt-5.2", "gpt-5.2"},
	{"gpt-5.2-pro", "gpt-5.2-pro"},
	{"gpt-5.2-codex", "gpt-5.2-codex"},
	{"gpt-5.1", "gpt-5.1"},
	{"gpt-5.1-codex", "gpt-5.1-codex"},
	{"gpt-5.1-codex-max", "gpt-5.1-codex-max"},
	{"gpt-5.1-codex-mini", "gpt-5.1-codex-mini"},
	{"gpt-5", "gpt-5"},
	{"gpt-5-codex", "gpt-5-codex"},
	{"gpt-5-pro", "gpt-5-pro"},
	{"gpt-5-mini", "gpt-5-mini"},
	{"gpt-5-nano", "gpt-5-nano"},
	{"gpt-4.1", "gpt-4.1"},
	{"gpt-4.1-mini", "gpt-4.1-mini"},
	{"gpt-4.1-nano", "gpt-4.1-nano"},
	{"gpt-4o", "gpt-4o"},
	// A dated name resolves to its undated model unless the table holds
	// the dated key: this one is priced apart ($5/$15, not $2.50/$10).
	{"gpt-4o-2024-05-13", "gpt-4o-2024-05-13"},
	{"gpt-4o-mini", "gpt-4o-mini"},
	{"o1", "o1"},
	{"o1-pro", "o1-pro"},
	{"o3", "o3"},
	{"o3-pro", "o3-pro"},
	{"o3-mini", "o3-mini"},
	{"o4-mini", "o4-mini"},
	{"gemini-3.1-pro-preview", "gemini/gemini-3.1-pro-preview"},
	{"gemini-3-pro-preview", "gemini/gemini-3-pro-preview"},
	{"gemini-pro-latest", "gemini/gemini-pro-latest"},
	{"gemini-3.5-flash", "gemini/gemini-3.5-flash"},
	{"gemini-3-flash-preview", "gemini/gemini-3-flash-preview"},
	{"gemini-flash-latest", "gemini/gemini-flash-latest"},
	{"gemini-3.1-flash-lite", "gemini/gemini-3.1-flash-lite"},
	{"gemini-3.1-flash-lite-preview", "gemini/gemini-3.1-flash-lite-preview"},
	{"gemini-flash-lite-latest", "gemini/gemini-flash-lite-latest"},
	{"gemini-2.5-pro", "gemini/gemini-2.5-pro"},
	{"gemini-2.5-flash", "gemini/gemini-2.5-flash"},
	{"gemini-2.5-flash-lite", "gemini/gemini-2.5-flash-lite"},
	{"deepseek-chat", "deepseek/deepseek-chat"},
	{"deepseek-reasoner", "deepseek/deepseek-reasoner"},
}

// ErrMissing is returned when the reference has no entry a built-in model
// is read from.
var ErrMissing = errors.New("the reference has no such entry")

// Source names the reference a table was generated from.
type Source struct {
	// Reference names the file and the commit it was read at, e.g.
	// "BerriAI/litellm model_prices_and_context_window.json @00035b69f416".
	Reference string
	// ReadOn is the date it was read (YYYY-MM-DD).
	ReadOn string
}

// Output is what Generate makes.
type Output struct {
	// Table is builtin.json: per model, its modelled price keys in key
	// order, each value the reference's own JSON text.
	Table []byte
	// Subset is the reference entries read, whole and unchanged (a valid
	// LiteLLM file): kept in pricing/testdata, it lets the table be
	// regenerated, and checked, without the whole reference at hand.
	Subset []byte
	// SourceGo is builtin_source.go: the constants citing the reference.
	SourceGo []byte
}

// tableOf writes the table: each of Models under Purser's name, with the
// reference entry's per-token price keys only. It returns the reference
// keys it read, sorted.
func tableOf(ref map[string]json.RawMessage) ([]byte, []string, error) {
	var table bytes.Buffer
	table.WriteString("{\n")
	keys := make([]string, 0, len(Models))
	for i, m := range Models {
		raw, ok := ref[m.Key]
		if !ok {
			return nil, nil, fmt.Errorf("builtingen: %s (for %s): %w", m.Key, m.Name, ErrMissing)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, nil, fmt.Errorf("builtingen: %s: not an object: %w", m.Key, err)
		}
		names := make([]string, 0, len(fields))
		for k := range fields {
			if pricing.ModelledKey(k) {
				names = append(names, k)
			}
		}
		if len(names) == 0 {
			return nil, nil, fmt.Errorf("builtingen: %s (for %s) has no per-token price", m.Key, m.Name)
		}
		sort.Strings(names)
		fmt.Fprintf(&table, "  %q: {", m.Name)
		for j, k := range names {
			if j > 0 {
				table.WriteString(", ")
			}
			fmt.Fprintf(&table, "%q: %s", k, bytes.TrimSpace(fields[k]))
		}
		table.WriteString("}")
		if i < len(Models)-1 {
			table.WriteString(",")
		}
		table.WriteString("\n")
		keys = append(keys, m.Key)
	}
	table.WriteString("}\n")
	sort.Strings(keys)
	return table.Bytes(), keys, nil
}

// subsetOf writes the reference's entries under keys, whole and indented.
func subsetOf(ref map[string]json.RawMessage, keys []string) ([]byte, error) {
	var subset bytes.Buffer
	subset.WriteString("{\n")
	for i, k := range keys {
		var entry bytes.Buffer
		if err := json.Indent(&entry, ref[k], "  ", "  "); err != nil {
			return nil, fmt.Errorf("builtingen: %s: %w", k, err)
		}
		fmt.Fprintf(&subset, "  %q: %s", k, entry.Bytes())
		if i < len(keys)-1 {
			subset.WriteString(",")
		}
		subset.WriteString("\n")
	}
	subset.WriteString("}\n")
	return subset.Bytes(), nil
}

// Generate reads the reference (LiteLLM's whole file, or a subset holding
// every entry Models names) and makes the table from it.
func Generate(reference []byte, src Source) (Output, error) {
	var ref map[string]json.RawMessage
	if err := json.Unmarshal(reference, &ref); err != nil {
		return Output{}, fmt.Errorf("builtingen: the reference is not a JSON object: %w", err)
	}
	table, keys, err := tableOf(ref)
	if err != nil {
		return Output{}, err
	}
	subset, err := subsetOf(ref, keys)
	if err != nil {
		return Output{}, err
	}
	// The table must be one Purser reads, every model priced.
	c, err := pricing.ParseLiteLLM(table, "generated table")
	if err != nil {
		return Output{}, fmt.Errorf("builtingen: the generated table does not parse: %w", err)
	}
	for _, m := range Models {
		if _, ok := c.Lookup(m.Name); !ok {
			return Output{}, fmt.Errorf("builtingen: the generated table does not price %s", m.Name)
		}
	}
	goSrc, err := format.Source(fmt.Appendf(nil, `// Code generated by pricing/cmd/genbuiltin; DO NOT EDIT.

package pricing

// BuiltinReadOn is the date the built-in prices were read.
const BuiltinReadOn = %q

// BuiltinReference is where the built-in prices were read: LiteLLM's
// reference table at the commit read.
const BuiltinReference = %q
`, src.ReadOn, src.Reference))
	if err != nil {
		return Output{}, err
	}
	return Output{Table: table, Subset: subset, SourceGo: goSrc}, nil
}
