// Package pricing is Purser's price catalogue: what a model's tokens cost,
// and the estimate of a call's cost from its tokens. A model with no known
// price is priced as unknown, never as zero.
package pricing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/purser-dev/purser/budget"
)

// PicoUSD is a per-token price in pico-dollars (1e-12 USD): fine enough for
// the cheapest cache-read prices, small enough that a billion tokens at the
// dearest price still fits in an int64.
type PicoUSD int64

// PerMillion returns a price given in dollars per million tokens, the way
// providers publish them. 5 dollars per million tokens is 5_000_000 pico-USD.
func PerMillion(dollars float64) PicoUSD { return PicoUSD(dollars*1e6 + 0.5) }

// Price is what one model charges per token.
type Price struct {
	Input      PicoUSD // uncached input
	Output     PicoUSD // output, reasoning included
	CacheRead  PicoUSD // input read from the cache
	CacheWrite PicoUSD // input written to the cache
}

// Cost estimates what a usage event's tokens cost at this price:
// (input − cache read − cache write) × input + cache read × its price +
// cache write × its price + output × output.
func (p Price) Cost(ev budget.UsageEvent) budget.USD {
	uncached := max(ev.InputTokens-ev.CacheReadTokens-ev.CacheWriteTokens, 0)
	var pico satInt
	pico.addProduct(uncached, int64(p.Input))
	pico.addProduct(ev.CacheReadTokens, int64(p.CacheRead))
	pico.addProduct(ev.CacheWriteTokens, int64(p.CacheWrite))
	pico.addProduct(ev.OutputTokens, int64(p.Output))
	// Round half up from pico- to nano-dollars.
	return budget.USD((uint64(pico) + 500) / 1000)
}

// satInt is a non-negative sum that sticks at MaxInt64 instead of wrapping:
// an absurd token count must price as enormous, never as negative.
type satInt int64

func (s *satInt) addProduct(a, b int64) {
	if a <= 0 || b <= 0 {
		return
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 || uint64(*s)+lo > math.MaxInt64 {
		*s = math.MaxInt64
		return
	}
	*s += satInt(lo)
}

// Entry is a priced model in a catalogue.
type Entry struct {
	Model  string
	Price  Price
	Source string // where the price was read, and when
}

// Catalogue maps model names to prices. The zero value is empty; use
// Builtin for today's main models. A Catalogue is not safe for concurrent
// modification, but safe for concurrent lookups once built.
type Catalogue struct {
	entries map[string]Entry
}

// New returns an empty catalogue.
func New() *Catalogue { return &Catalogue{entries: map[string]Entry{}} }

// Set adds or replaces a model's price.
func (c *Catalogue) Set(e Entry) {
	if c.entries == nil {
		c.entries = map[string]Entry{}
	}
	e.Model = strings.ToLower(strings.TrimSpace(e.Model))
	c.entries[e.Model] = e
}

// Merge copies every entry of other into c, overriding c's.
func (c *Catalogue) Merge(other *Catalogue) {
	for _, e := range other.entries {
		c.Set(e)
	}
}

// Len returns the number of priced model names.
func (c *Catalogue) Len() int { return len(c.entries) }

// Models returns the priced model names, sorted.
func (c *Catalogue) Models() []string {
	names := make([]string, 0, len(c.entries))
	for n := range c.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var (
	contextSuffix = regexp.MustCompile(`\[[^\]]*\]$`) // claude-opus-4-8[1m]
	bedrockPrefix = regexp.MustCompile(`^((us|eu|apac|global|jp|au)\.)?(anthropic|meta|amazon|mistral|cohere)\.`)
	bedrockSuffix = regexp.MustCompile(`-v\d+(:\d+)?$`)               // …-20250929-v1:0
	vertexDate    = regexp.MustCompile(`@(\d{8}|latest|default)$`)    // claude-sonnet-4-5@20250929
	datedSuffix   = regexp.MustCompile(`-(\d{8}|\d{4}-\d{2}-\d{2})$`) // -20250929, -2025-08-07
)

// candidates lists the names a model may be priced under, most specific
// first. Each step removes one kind of decoration a provider adds to the same
// model; none of them guesses a different model (gpt-5-mini never becomes
// gpt-5), so a name that is really unknown stays unknown.
func candidates(model string) []string {
	name := strings.ToLower(strings.TrimSpace(model))
	var out []string
	add := func(s string) {
		for _, o := range out {
			if o == s {
				return
			}
		}
		if s != "" {
			out = append(out, s)
		}
	}
	add(name)
	name = contextSuffix.ReplaceAllString(name, "")
	add(name)
	// Provider prefixes, one segment at a time: openrouter/anthropic/x → anthropic/x → x.
	for {
		add(name)
		i := strings.Index(name, "/")
		if i < 0 {
			break
		}
		name = name[i+1:]
	}
	name = bedrockPrefix.ReplaceAllString(name, "")
	name = bedrockSuffix.ReplaceAllString(name, "")
	name = vertexDate.ReplaceAllString(name, "")
	add(name)
	add(datedSuffix.ReplaceAllString(name, ""))
	return out
}

// Lookup finds the price of a model, matching the name exactly first and
// then without provider decorations (context-window tags such as "[1m]",
// provider prefixes such as "anthropic/", Bedrock and Vertex forms, dated
// suffixes). It returns the catalogue entry that matched.
func (c *Catalogue) Lookup(model string) (Entry, bool) {
	if c == nil {
		return Entry{}, false
	}
	for _, n := range candidates(model) {
		if e, ok := c.entries[n]; ok {
			return e, true
		}
	}
	return Entry{}, false
}

// Estimate prices an event's tokens. It returns the event with USD and
// CostSource set: estimated when the model is priced, unknown when it is not
// and the event has tokens, and unchanged when the event already carries a
// reported or estimated cost or has no tokens, so pricing an event twice
// changes nothing. The engine calls it on every usage event it records;
// backends never do.
func (c *Catalogue) Estimate(ev budget.UsageEvent) budget.UsageEvent {
	if ev.CostSource == budget.CostReported || ev.CostSource == budget.CostEstimated {
		return ev
	}
	if ev.Tokens() == 0 {
		return ev
	}
	e, ok := c.Lookup(ev.Model)
	if !ok {
		ev.USD, ev.CostSource = 0, budget.CostUnknown
		return ev
	}
	ev.USD, ev.CostSource = e.Price.Cost(ev), budget.CostEstimated
	return ev
}

// litellmEntry is one model in LiteLLM's model_prices_and_context_window.json.
type litellmEntry struct {
	Input      *json.Number `json:"input_cost_per_token"`
	Output     *json.Number `json:"output_cost_per_token"`
	CacheRead  *json.Number `json:"cache_read_input_token_cost"`
	CacheWrite *json.Number `json:"cache_creation_input_token_cost"`
}

// ErrNoPrices is returned when a price file priced no model at all.
var ErrNoPrices = errors.New("no model with an input_cost_per_token and output_cost_per_token")

// ParseLiteLLM reads prices in the format of LiteLLM's
// model_prices_and_context_window.json: an object of model name → fields
// input_cost_per_token, output_cost_per_token, cache_read_input_token_cost and
// cache_creation_input_token_cost, in dollars per token. Other fields are
// ignored, as are entries without input and output prices (embeddings,
// images, the "sample_spec" entry). A missing cache price falls back to the
// input price, as LiteLLM does. source labels where the file came from.
func ParseLiteLLM(data []byte, source string) (*Catalogue, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object of model prices: %w", source, err)
	}
	c := New()
	for name, msg := range raw {
		if name == "sample_spec" || strings.TrimSpace(name) == "" {
			continue
		}
		var le litellmEntry
		d := json.NewDecoder(bytes.NewReader(msg))
		d.UseNumber()
		if err := d.Decode(&le); err != nil {
			return nil, fmt.Errorf("%s: model %q: %w", source, name, err)
		}
		if le.Input == nil || le.Output == nil {
			continue
		}
		var p Price
		var err error
		field := func(n *json.Number, key string, fallback PicoUSD) PicoUSD {
			if err != nil {
				return 0
			}
			if n == nil {
				return fallback
			}
			var v PicoUSD
			v, err = parsePerToken(string(*n))
			if err != nil {
				err = fmt.Errorf("%s: model %q: %s: %w", source, name, key, err)
			}
			return v
		}
		p.Input = field(le.Input, "input_cost_per_token", 0)
		p.Output = field(le.Output, "output_cost_per_token", 0)
		p.CacheRead = field(le.CacheRead, "cache_read_input_token_cost", p.Input)
		p.CacheWrite = field(le.CacheWrite, "cache_creation_input_token_cost", p.Input)
		if err != nil {
			return nil, err
		}
		c.Set(Entry{Model: name, Price: p, Source: source})
	}
	if c.Len() == 0 {
		return nil, fmt.Errorf("%s: %w", source, ErrNoPrices)
	}
	return c, nil
}

// LoadLiteLLM reads a price file in LiteLLM's format (see ParseLiteLLM),
// labelled with its path.
func LoadLiteLLM(path string) (*Catalogue, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return ParseLiteLLM(data, path)
}

// parsePerToken reads a dollars-per-token figure exactly into pico-dollars.
func parsePerToken(s string) (PicoUSD, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if r.Sign() < 0 {
		return 0, fmt.Errorf("%s: a price must not be negative", s)
	}
	r.Mul(r, big.NewRat(1e12, 1))
	n := new(big.Int).Quo(new(big.Int).Add(r.Num(), new(big.Int).Quo(r.Denom(), big.NewInt(2))), r.Denom())
	if !n.IsInt64() || n.Int64() > 1e12 {
		return 0, fmt.Errorf("%s dollars per token is out of range", s)
	}
	return PicoUSD(n.Int64()), nil
}
