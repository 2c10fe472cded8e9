// Package pricing is Purser's price catalogue: what a model's tokens cost,
// and the estimate of a call's cost from its tokens. A model with no known
// price is priced as unknown, never as zero.
//
// A price carries every dimension that changes a bill and that LiteLLM's
// model_prices_and_context_window.json records per token: input, output,
// cache reads, 5-minute and 1-hour cache writes, reasoning output, long-context
// tiers (rates that apply to the whole request once its input passes a
// threshold) and service tiers (priority, flex, batch).
package pricing

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"math/bits"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
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

// Rates is one set of per-token prices. A zero CacheWrite1h prices 1-hour
// cache writes at CacheWrite (the table gave no 1-hour price; the estimate
// says so); a zero Reasoning prices reasoning tokens as output.
type Rates struct {
	Input        PicoUSD // uncached input
	Output       PicoUSD // output, reasoning included unless Reasoning is set
	CacheRead    PicoUSD // input read from the cache
	CacheWrite   PicoUSD // input written to the cache (5-minute cache)
	CacheWrite1h PicoUSD // input written to the 1-hour cache
	Reasoning    PicoUSD // reasoning output, when priced apart from output
}

// Tier is a long-context tier: its rates apply to a whole request whose
// input (cached tokens included) exceeds AboveInput tokens, as Anthropic,
// Google and OpenAI bill it.
type Tier struct {
	AboveInput int64
	Rates      Rates
}

// Service tiers a provider may bill a request under.
const (
	ServiceStandard = "standard"
	ServicePriority = "priority"
	ServiceFlex     = "flex"
	ServiceBatch    = "batch"
)

// Price is what one model charges per token: standard rates, long-context
// tiers (ascending), and the prices of other service tiers by name
// (ServicePriority, ServiceFlex, ServiceBatch), each with its own tiers.
type Price struct {
	Input        PicoUSD
	Output       PicoUSD
	CacheRead    PicoUSD
	CacheWrite   PicoUSD
	CacheWrite1h PicoUSD
	Reasoning    PicoUSD
	Tiers        []Tier
	Services     map[string]*Price
}

// Base returns the standard, short-context rates.
func (p Price) Base() Rates {
	return Rates{Input: p.Input, Output: p.Output, CacheRead: p.CacheRead, CacheWrite: p.CacheWrite, CacheWrite1h: p.CacheWrite1h, Reasoning: p.Reasoning}
}

// Applied is the rates an event is priced at and how they were chosen.
type Applied struct {
	Rates   Rates
	Service string // the service tier priced ("standard" when none was asked)
	Above   int64  // the long-context threshold passed, 0 if none
	Notes   []string
	// Unpriced is set when the event cannot be priced honestly (a priority
	// request on a model whose priority rates are not known): the estimate
	// would be low, so the cost is unknown.
	Unpriced string
}

// Describe is a short account of the rates applied, for provenance.
func (a Applied) Describe() string {
	parts := []string{a.Service}
	if a.Above > 0 {
		parts = append(parts, fmt.Sprintf("input above %s tokens", groupDigits(a.Above)))
	} else {
		parts = append(parts, "base rates")
	}
	parts = append(parts, a.Notes...)
	return strings.Join(parts, ", ")
}

// Rate chooses the rates for an event: the service tier it was billed under,
// then the highest long-context tier its request's input passes (the
// event's own input, or RequestInputTokens when the event is a piece of a
// larger request: its output is billed at the request's tier).
func (p Price) Rate(ev budget.UsageEvent) Applied {
	input := max(ev.InputTokens, ev.RequestInputTokens)
	service := strings.ToLower(strings.TrimSpace(ev.ServiceTier))
	if service == "" || service == "default" || service == "auto" {
		service = ServiceStandard
	}
	a := Applied{Service: service}
	chosen := &p
	if service != ServiceStandard {
		if sp, ok := p.Services[service]; ok {
			chosen = sp
		} else if service == ServicePriority {
			// Priority costs more than standard: standard rates would count less money.
			a.Unpriced = "the table gives no priority rates for this model"
			return a
		} else {
			// Flex and batch cost less than standard: standard rates are an upper bound.
			a.Notes = append(a.Notes, "no "+service+" rates in the table, priced at standard (an upper bound)")
			a.Service = ServiceStandard
		}
	}
	a.Rates = chosen.Base()
	for _, t := range chosen.Tiers {
		if input > t.AboveInput {
			a.Rates, a.Above = t.Rates, t.AboveInput
		}
	}
	if chosen != &p && len(chosen.Tiers) == 0 {
		var passed *Tier
		for i, t := range p.Tiers {
			if input > t.AboveInput {
				passed = &p.Tiers[i]
			}
		}
		switch {
		case passed == nil:
		case a.Service == ServiceFlex || a.Service == ServiceBatch:
			// OpenAI bills a long-context request "for standard, batch and
			// flex" at the standard long-context multiplier (2× input, 1.5×
			// output above 272k): the tier's rates scaled by the same ratio.
			a.Rates, a.Above = scaleRates(a.Rates, p.Base(), passed.Rates), passed.AboveInput
			a.Notes = append(a.Notes, fmt.Sprintf("%s rates × the standard long-context multiplier above %s input tokens (%s)",
				a.Service, groupDigits(passed.AboveInput), multipliers(p.Base(), passed.Rates)))
		default:
			a.Notes = append(a.Notes, fmt.Sprintf("the table gives no %s rates above %s input tokens: %s base rates used (may be low)", a.Service, groupDigits(passed.AboveInput), a.Service))
		}
	}
	if ev.CacheWrite1hTokens > 0 && a.Rates.CacheWrite1h == 0 {
		a.Notes = append(a.Notes, "no 1-hour cache-write price in the table: 1-hour writes priced as 5-minute writes (may be low)")
	}
	return a
}

// scaleRates applies the ratio long/base of each field to r: a service
// tier's short-context rates become its long-context rates. A field whose
// standard base rate is zero (no ratio to take) stays as it is, and so does a
// zero field of r (it falls back to another field when priced, which is
// scaled).
func scaleRates(r, base, long Rates) Rates {
	scale := func(v, b, l PicoUSD) PicoUSD {
		if v == 0 || b == 0 {
			return v
		}
		n := new(big.Int).Mul(big.NewInt(int64(v)), big.NewInt(int64(l)))
		n.Add(n, big.NewInt(int64(b)/2)) // round half up to the pico-dollar
		n.Quo(n, big.NewInt(int64(b)))
		if !n.IsInt64() {
			return PicoUSD(math.MaxInt64)
		}
		return PicoUSD(n.Int64())
	}
	return Rates{
		Input:        scale(r.Input, base.Input, long.Input),
		Output:       scale(r.Output, base.Output, long.Output),
		CacheRead:    scale(r.CacheRead, base.CacheRead, long.CacheRead),
		CacheWrite:   scale(r.CacheWrite, base.CacheWrite, long.CacheWrite),
		CacheWrite1h: scale(r.CacheWrite1h, base.CacheWrite1h, long.CacheWrite1h),
		Reasoning:    scale(r.Reasoning, base.Reasoning, long.Reasoning),
	}
}

// multipliers writes the ratios scaleRates applies: "input ×2, output ×1.5".
func multipliers(base, long Rates) string {
	var parts []string
	for _, f := range []struct {
		name string
		b, l PicoUSD
	}{{"input", base.Input, long.Input}, {"output", base.Output, long.Output}, {"cache read", base.CacheRead, long.CacheRead}} {
		if f.b > 0 {
			ratio := new(big.Rat).SetFrac64(int64(f.l), int64(f.b))
			parts = append(parts, f.name+" ×"+strings.TrimRight(strings.TrimRight(ratio.FloatString(4), "0"), "."))
		}
	}
	return strings.Join(parts, ", ")
}

// Cost estimates what a usage event's tokens cost at this price, the whole
// request at the rates Rate chooses. It is zero when Rate finds the event
// unpriceable; Estimate reports such an event as unknown.
func (p Price) Cost(ev budget.UsageEvent) budget.USD {
	a := p.Rate(ev)
	if a.Unpriced != "" {
		return 0
	}
	return a.Rates.Cost(ev)
}

// Cost prices an event's tokens at these rates:
// uncached input × input + cache reads × their price + 5-minute and 1-hour
// cache writes × theirs + output × output (reasoning at its own price when
// set), rounded half up to the nano-dollar.
func (r Rates) Cost(ev budget.UsageEvent) budget.USD {
	uncached := max(ev.InputTokens-ev.CacheReadTokens-ev.CacheWriteTokens, 0)
	write1h := min(max(ev.CacheWrite1hTokens, 0), max(ev.CacheWriteTokens, 0))
	write5m := max(ev.CacheWriteTokens-write1h, 0)
	w1h := r.CacheWrite1h
	if w1h == 0 {
		w1h = r.CacheWrite
	}
	reasoning, output := int64(0), ev.OutputTokens
	if r.Reasoning > 0 {
		reasoning = min(max(ev.ReasoningTokens, 0), max(ev.OutputTokens, 0))
		output -= reasoning
	}
	var pico satInt
	pico.addProduct(uncached, int64(r.Input))
	pico.addProduct(ev.CacheReadTokens, int64(r.CacheRead))
	pico.addProduct(write5m, int64(r.CacheWrite))
	pico.addProduct(write1h, int64(w1h))
	pico.addProduct(output, int64(r.Output))
	pico.addProduct(reasoning, int64(r.Reasoning))
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
	Source string // which table the price was read from: built-in with its date, or a file with its SHA-256
}

// Catalogue maps model names to prices. The zero value is empty; use
// Builtin for today's main models. A Catalogue is not safe for concurrent
// modification, but safe for concurrent lookups once built.
type Catalogue struct {
	entries  map[string]Entry
	aliases  map[string][]string // bare name → the decorated keys that may price it, best first (see Resolve)
	unpriced map[string]string   // a table entry Purser cannot price → why (see Resolution.Unpriced)
	warnings []string
}

// New returns an empty catalogue.
func New() *Catalogue {
	return &Catalogue{entries: map[string]Entry{}, aliases: map[string][]string{}, unpriced: map[string]string{}}
}

// Set adds or replaces a model's price.
func (c *Catalogue) Set(e Entry) {
	if c.entries == nil {
		c.entries = map[string]Entry{}
	}
	e.Model = strings.ToLower(strings.TrimSpace(e.Model))
	c.entries[e.Model] = e
	delete(c.unpriced, e.Model)
	c.addAlias(e.Model)
}

// addAlias files a decorated key under the bare name it stands for, keeping
// each list shortest key first, then in order.
func (c *Catalogue) addAlias(key string) {
	if c.aliases == nil {
		c.aliases = map[string][]string{}
	}
	bare := normalise(key)
	if bare == key {
		return
	}
	keys := c.aliases[bare]
	for _, k := range keys {
		if k == key {
			return
		}
	}
	keys = append(keys, key)
	sort.Slice(keys, func(i, j int) bool {
		if len(keys[i]) != len(keys[j]) {
			return len(keys[i]) < len(keys[j])
		}
		return keys[i] < keys[j]
	})
	c.aliases[bare] = keys
}

// setUnpriced records a table entry that names a model but cannot price it.
func (c *Catalogue) setUnpriced(key, why string) {
	if c.unpriced == nil {
		c.unpriced = map[string]string{}
	}
	key = strings.ToLower(strings.TrimSpace(key))
	c.unpriced[key] = why
	c.addAlias(key)
}

// Merge copies every entry of other into c, overriding c's, and keeps
// other's warnings.
func (c *Catalogue) Merge(other *Catalogue) {
	for k, why := range other.unpriced {
		if _, priced := c.entries[k]; !priced {
			c.setUnpriced(k, why)
		}
	}
	for _, e := range other.entries {
		c.Set(e)
	}
	c.warnings = append(c.warnings, other.warnings...)
}

// Warnings lists what reading the catalogue's price tables left out: price
// keys it does not model, each named. The CLI prints them on stderr.
func (c *Catalogue) Warnings() []string {
	if c == nil {
		return nil
	}
	return append([]string(nil), c.warnings...)
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
	// Bedrock's model ids: a vendor prefix (anthropic.), after an optional
	// cross-region prefix. global. is billed as the vendor's own price; the
	// geographic ones (us., eu., apac., jp., au., us-gov.) carry their own,
	// higher prices and are never stripped (see regional).
	bedrockPrefix = regexp.MustCompile(`^(global\.)?(anthropic|meta|amazon|mistral|cohere|deepseek|openai)\.`)
	bedrockSuffix = regexp.MustCompile(`-v\d+(:\d+)?$`)               // …-20250929-v1:0
	vertexDate    = regexp.MustCompile(`@(\d{8}|latest|default)$`)    // claude-sonnet-4-5@20250929
	datedSuffix   = regexp.MustCompile(`-(\d{8}|\d{4}-\d{2}-\d{2})$`) // -20250929, -2025-08-07
	// OpenRouter writes Anthropic versions with a dot (claude-sonnet-4.5);
	// Anthropic, and so the tables, with a hyphen. Only Claude names are
	// rewritten: OpenAI and Google versions are dotted in their own names.
	claudeDotted = regexp.MustCompile(`^(claude-(?:[a-z]+-)?\d+)\.(\d+)`)
	// regional is a name, or a path segment, that bills a region's price:
	// Bedrock's geographic cross-region prefixes (us.anthropic.…), a cloud
	// region (bedrock/us-gov-west-1/…, vertex_ai/europe-west4/…) or Azure's
	// data-zone deployments (azure/eu/…). A regional name is priced only by
	// its own entry: stripping the region would price it at the global,
	// cheaper rate.
	regional = regexp.MustCompile(`^((us|eu|apac|jp|au|ca|us-gov)\.|(us|eu)/|[a-z]{2,}(-gov)?-[a-z]+-?\d+/)`)
)

// Route is the host a call actually reached: the same model name is billed
// differently through OpenRouter, Vertex AI, Bedrock, Azure or the model
// maker's own API, and a LiteLLM table prices each under its own key
// (openrouter/…, vertex_ai/…, gemini/…). The zero Route is unknown.
type Route string

// Routes a lookup knows how to prefer.
const (
	RouteUnknown    Route = ""
	RouteOpenRouter Route = "openrouter" // openrouter.ai: LiteLLM's openrouter/ keys
	RouteVertex     Route = "vertex_ai"  // Google Vertex AI: vertex_ai/ keys, and LiteLLM's bare Gemini keys
	RouteGemini     Route = "gemini"     // Google AI Studio (generativelanguage.googleapis.com): gemini/ keys
	RouteBedrock    Route = "bedrock"    // AWS Bedrock: bedrock/ keys and the bare anthropic.… ids
	RouteAzure      Route = "azure"      // Azure OpenAI: azure/ keys
	RouteDirect     Route = "direct"     // the model maker's own API (Anthropic, OpenAI, DeepSeek): the bare keys
)

// RouteOf infers the route from a backend's provider base URL (what
// CLIOptions.Upstream returns): RouteUnknown for a URL it does not know,
// which keeps the lookup as it is without a route.
func RouteOf(baseURL string) Route {
	u := strings.ToLower(baseURL)
	switch {
	case u == "":
		return RouteUnknown
	case strings.Contains(u, "openrouter.ai"):
		return RouteOpenRouter
	case strings.Contains(u, "aiplatform.googleapis.com"):
		return RouteVertex
	case strings.Contains(u, "generativelanguage.googleapis.com"):
		return RouteGemini
	case strings.Contains(u, "bedrock"):
		return RouteBedrock
	case strings.Contains(u, ".openai.azure.com"), strings.Contains(u, ".azure.com"):
		return RouteAzure
	case strings.Contains(u, "api.anthropic.com"), strings.Contains(u, "api.openai.com"), strings.Contains(u, "api.deepseek.com"):
		return RouteDirect
	}
	return RouteUnknown
}

// ParseRoute reads a route by name, as a flag or a record writes it
// ("openrouter", "vertex_ai" or "vertex", "gemini" or "aistudio", "bedrock",
// "azure", "direct"; "" is unknown). An unknown name is an error naming the
// known ones.
func ParseRoute(name string) (Route, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "":
		return RouteUnknown, nil
	case "openrouter":
		return RouteOpenRouter, nil
	case "vertex_ai", "vertex":
		return RouteVertex, nil
	case "gemini", "aistudio", "ai-studio":
		return RouteGemini, nil
	case "bedrock":
		return RouteBedrock, nil
	case "azure":
		return RouteAzure, nil
	case "direct":
		return RouteDirect, nil
	}
	return RouteUnknown, fmt.Errorf("route %q: want openrouter, vertex_ai, gemini, bedrock, azure or direct", name)
}

// keyPrefix is the LiteLLM key prefix of a route's own entries.
func (r Route) keyPrefix() string {
	switch r {
	case RouteOpenRouter, RouteVertex, RouteGemini, RouteBedrock, RouteAzure:
		return string(r) + "/"
	}
	return ""
}

// hosts are LiteLLM's provider prefixes: a name whose first segment is one
// of them is that host's key, not an OpenRouter vendor/model id. The value
// says whether the host sets its own prices for other makers' models
// (true), so that a name through it is priced only by its own entry, or
// bills the maker's list price (false: OpenRouter, the clouds' global
// endpoints, the makers' own APIs), so that the prefix may be stripped.
var hosts = map[string]bool{
	"openrouter": false, "vertex_ai": false, "gemini": false, "bedrock": false, "bedrock_converse": false,
	"azure": false, "azure_ai": false, "vercel_ai_gateway": false,
	"together_ai": true, "fireworks_ai": true, "groq": true, "deepinfra": true, "ollama": true, "ollama_chat": true,
	"perplexity": true, "cerebras": true, "nebius": true, "novita": true, "dashscope": true, "github_copilot": true,
	"databricks": true, "snowflake": true, "sambanova": true, "replicate": true, "baseten": true, "hyperbolic": true,
	"lambda_ai": true, "ovhcloud": true, "publicai": true, "oci": true, "heroku": true, "watsonx": true,
	"sagemaker": true, "cloudflare": true, "friendliai": true, "featherless_ai": true, "nscale": true, "wandb": true,
}

// isHost reports that a name's first segment is a LiteLLM host prefix.
func isHost(segment string) bool {
	_, ok := hosts[segment]
	return ok
}

// makers are the key prefixes of a model maker's own API (Google AI
// Studio's gemini/, DeepSeek's deepseek/): OpenRouter and the maker's API
// bill the maker's price, so through them such a key prices the bare name.
var makers = map[string]bool{"gemini": true, "deepseek": true, "anthropic": true, "openai": true}

// routeFor is the route to prefer for a name when the caller knows none: a
// bare Gemini name is Google AI Studio's (LiteLLM's bare Gemini keys are
// Vertex's prices), and a vendor/model id whose vendor is not a LiteLLM host
// (qwen/…, z-ai/…, anthropic/…) is OpenRouter's way of naming a model.
func routeFor(name string, route Route) Route {
	if route != RouteUnknown {
		return route
	}
	if strings.HasPrefix(name, "gemini-") {
		return RouteGemini
	}
	if i := strings.Index(name, "/"); i > 0 && !isHost(name[:i]) {
		return RouteOpenRouter
	}
	return RouteUnknown
}

// candidates lists the names a model may be priced under, most specific
// first. Each step removes one kind of decoration a provider adds to the same
// model; none of them guesses a different model (gpt-5-mini never becomes
// gpt-5), and none strips a region (regional names are billed their own
// price), so a name that is really unknown stays unknown.
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
		if regional.MatchString(name) {
			return out
		}
		i := strings.Index(name, "/")
		if i < 0 {
			break
		}
		if hosts[name[:i]] {
			// A host with its own prices (together_ai/…, groq/…): only its
			// own entry prices the name, never the maker's list price.
			return out
		}
		name = name[i+1:]
	}
	if regional.MatchString(name) {
		return out
	}
	name = bedrockPrefix.ReplaceAllString(name, "")
	name = bedrockSuffix.ReplaceAllString(name, "")
	name = vertexDate.ReplaceAllString(name, "")
	add(name)
	undated := datedSuffix.ReplaceAllString(name, "")
	add(undated)
	// claude-sonnet-4.5 → claude-sonnet-4-5 (claude-3.5-haiku → claude-3-5-haiku).
	for _, n := range []string{name, undated} {
		add(claudeDotted.ReplaceAllString(n, "$1-$2"))
	}
	return out
}

// routed puts the route's own keys first: each candidate under the route's
// key prefix, then the candidate itself. A bare Gemini name off Vertex is
// Google AI Studio's, so gemini/… comes before it on every other route
// (OpenRouter bills Google's own price).
func routed(tried []string, route Route) []string {
	prefix := route.keyPrefix()
	var out []string
	seen := map[string]bool{}
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, n := range tried {
		if prefix != "" && !strings.HasPrefix(n, prefix) {
			add(prefix + n)
		}
		if route != RouteVertex && strings.HasPrefix(n, "gemini-") {
			add("gemini/" + n)
		}
		add(n)
	}
	return out
}

// normalise is the bare name a decorated table key stands for (its last
// candidate): openrouter/anthropic/claude-sonnet-4.5 → claude-sonnet-4-5.
func normalise(model string) string {
	c := candidates(model)
	if len(c) == 0 {
		return ""
	}
	return c[len(c)-1]
}

// Resolution is how a model name was matched in the catalogue.
type Resolution struct {
	Query     string   // the name asked for
	Route     Route    // the route preferred (given, or inferred from the name)
	Tried     []string // the names tried, in order
	MatchedAs string   // the tried name that matched
	Key       string   // the catalogue key that priced it
	Alias     bool     // matched through a decorated key's bare name (a prefix added)
	// Unpriced, when no key priced the name, says why a table entry that
	// names it could not: priced only by keys Purser does not model
	// (tiered_pricing, per-second or per-character prices), or a zero price
	// on a model not marked free.
	Unpriced string
}

// Resolve finds the price of a model as ResolveRoute does, for a call whose
// route is not known.
func (c *Catalogue) Resolve(model string) (Entry, Resolution, bool) {
	return c.ResolveRoute(model, RouteUnknown)
}

// ResolveRoute finds the price of a model reached through route, matching
// the name exactly first and then without provider decorations
// (context-window tags such as "[1m]", provider prefixes such as
// "anthropic/", Bedrock and Vertex forms, dated suffixes, OpenRouter's dotted
// Claude versions). The route's own keys come first: through OpenRouter
// "qwen/qwen3-235b-a22b-thinking-2507" is priced by
// "openrouter/qwen/qwen3-235b-a22b-thinking-2507", through Google AI Studio
// "gemini-2.5-pro" by "gemini/gemini-2.5-pro" and through Vertex by
// "vertex_ai/…" or LiteLLM's bare Gemini key. With no route, a bare Gemini
// name is taken as AI Studio's and a vendor/model id as OpenRouter's.
//
// When no table key has a tried name, a key that is a decorated form of it is
// taken (a table holding only "gemini/gemini-2.5-pro" prices
// "gemini-2.5-pro"): the route's own key, else (route known) a key of no
// other host, else (route unknown) the shortest key, then the first in
// order — so "anthropic.claude-…" is chosen over its regional
// "eu.anthropic.claude-…" twin. A different model is never guessed: matching
// is on whole names, never on prefixes; and a regional name is never priced
// as its global model.
func (c *Catalogue) ResolveRoute(model string, route Route) (Entry, Resolution, bool) {
	plain := candidates(model)
	name := ""
	if len(plain) > 0 {
		name = plain[0]
	}
	given := route
	route = routeFor(name, route)
	r := Resolution{Query: model, Route: route, Tried: routed(plain, route)}
	if c == nil || len(plain) == 0 {
		return Entry{}, r, false
	}
	// The first name the table holds decides, priced or not: an entry
	// Purser cannot price makes the name unknown (with the reason), never
	// priced as another host's entry further down the list.
	decide := func(key string, alias bool) (Entry, bool, bool) {
		if e, ok := c.entries[key]; ok {
			r.Key, r.Alias = key, alias
			r.MatchedAs = key
			if alias {
				r.MatchedAs = normalise(key)
			}
			return e, true, true
		}
		if why, ok := c.unpriced[key]; ok {
			r.Unpriced = why
			return Entry{}, false, true
		}
		return Entry{}, false, false
	}
	var order []string
	if given == RouteUnknown && route == RouteOpenRouter {
		// An OpenRouter id inferred from the name: the name as given still
		// comes first (a table's deepseek/deepseek-chat is DeepSeek's own
		// key, not an OpenRouter id).
		order = append(order, plain[0])
	}
	// The route's own keys: its prefix added to each name, then the keys of
	// that prefix standing for a bare name (openrouter/qwen/x for x).
	for _, n := range r.Tried {
		if !slices.Contains(plain, n) {
			order = append(order, n)
		}
	}
	for _, key := range order {
		if e, ok, done := decide(key, !slices.Contains(plain, key)); done {
			return e, r, ok
		}
	}
	if prefix := route.keyPrefix(); prefix != "" {
		for _, n := range plain {
			for _, key := range c.aliases[n] {
				if strings.HasPrefix(key, prefix) {
					if e, ok, done := decide(key, true); done {
						return e, r, ok
					}
				}
			}
		}
	}
	for _, n := range plain {
		if e, ok, done := decide(n, false); done {
			return e, r, ok
		}
	}
	for _, n := range plain {
		if key := c.alias(n, route); key != "" {
			if e, ok, done := decide(key, true); done {
				return e, r, ok
			}
		}
	}
	return Entry{}, r, false
}

// alias picks, among the decorated keys standing for bare, the one to price
// it through route (see ResolveRoute); "" if none fits.
func (c *Catalogue) alias(bare string, route Route) string {
	keys := c.aliases[bare]
	if len(keys) == 0 {
		return ""
	}
	prefix := route.keyPrefix()
	if route == RouteUnknown {
		return keys[0]
	}
	for _, k := range keys {
		if prefix != "" && strings.HasPrefix(k, prefix) {
			return k
		}
	}
	for _, k := range keys {
		i := strings.Index(k, "/")
		if i < 0 || !isHost(k[:i]) {
			return k // no host's key: the model maker's own name for it
		}
		// OpenRouter and the maker's own API bill a maker's model at the
		// maker's price: Google AI Studio's gemini/ keys, DeepSeek's.
		if (route == RouteOpenRouter || route == RouteDirect) && makers[k[:i]] {
			return k
		}
	}
	return ""
}

// Lookup finds the price of a model as Resolve does and returns the entry.
func (c *Catalogue) Lookup(model string) (Entry, bool) {
	e, _, ok := c.Resolve(model)
	return e, ok
}

// Estimate prices an event's tokens. It returns the event with USD,
// CostSource and PriceSource set: estimated when the model is priced, unknown
// when it is not (or when its rates for the event's service tier are not
// known and standard rates would count less) and the event has tokens, and
// unchanged when the event already carries a reported or estimated cost or
// has no tokens, so pricing an event twice changes nothing. The engine calls
// it on every usage event it records; backends never do.
func (c *Catalogue) Estimate(ev budget.UsageEvent) budget.UsageEvent {
	return c.EstimateRoute(ev, RouteUnknown)
}

// EstimateRoute prices an event as Estimate does, for a call that reached
// its model through route (see ResolveRoute): a backend that knows its
// provider base URL passes RouteOf(url).
func (c *Catalogue) EstimateRoute(ev budget.UsageEvent, route Route) budget.UsageEvent {
	if ev.CostSource == budget.CostReported || ev.CostSource == budget.CostEstimated {
		return ev
	}
	if ev.Tokens() == 0 {
		return ev
	}
	e, r, ok := c.ResolveRoute(ev.Model, route)
	if !ok {
		ev.USD, ev.CostSource = 0, budget.CostUnknown
		ev.PriceSource = fmt.Sprintf("no price for %q in the catalogue", ev.Model)
		if r.Unpriced != "" {
			ev.PriceSource += ": " + r.Unpriced
		}
		return ev
	}
	a := e.Price.Rate(ev)
	ev.PriceSource = fmt.Sprintf("%s as %s (%s)", e.Source, r.Key, a.Describe())
	if a.Unpriced != "" {
		ev.USD, ev.CostSource = 0, budget.CostUnknown
		ev.PriceSource = fmt.Sprintf("%s as %s: %s service tier: %s", e.Source, r.Key, a.Service, a.Unpriced)
		return ev
	}
	ev.USD, ev.CostSource = a.Rates.Cost(ev), budget.CostEstimated
	return ev
}

// ErrNoPrices is returned when a price file priced no model at all.
var ErrNoPrices = errors.New("no model with an input_cost_per_token and output_cost_per_token")

// The LiteLLM keys Purser models. A key is a base, then optionally a
// long-context suffix (_above_200k_tokens), then optionally a service tier
// (_priority, _flex, _batches) — in that order, as LiteLLM writes them
// (input_cost_per_token_above_200k_tokens_priority).
var priceKey = regexp.MustCompile(`^(input_cost_per_token_cache_hit|input_cost_per_token|output_cost_per_reasoning_token|output_cost_per_token|cache_read_input_token_cost|cache_creation_input_token_cost_above_1hr|cache_creation_input_token_cost)(?:_above_(\d+)k_tokens)?(?:_(priority|flex|batches))?$`)

// ModelledKey reports whether a LiteLLM key is one of the per-token prices
// Purser prices calls with: the keys the built-in table is made of
// (pricing/builtingen copies exactly these from the reference).
func ModelledKey(key string) bool { return priceKey.MatchString(key) }

// looksLikePrice is a key that seems to change a bill: reported by name
// when Purser does not model it.
func looksLikePrice(key string) bool {
	k := strings.ToLower(key)
	return strings.Contains(k, "cost") || strings.Contains(k, "price") || strings.Contains(k, "pricing") || strings.Contains(k, "multiplier") ||
		k == "provider_specific_entry"
}

// cellKey names one cell of an entry's rates: a long-context threshold
// (0: none) and a service tier ("": standard).
type cellKey struct {
	above   int64
	service string
}

// rateSet gathers one (tier, service) cell's rates while a file is read.
type rateSet struct {
	input, output, cacheRead, cacheHit, cacheWrite, cacheWrite1h, reasoning *PicoUSD
}

func (s *rateSet) field(base string) **PicoUSD {
	switch base {
	case "input_cost_per_token":
		return &s.input
	case "output_cost_per_token":
		return &s.output
	case "cache_read_input_token_cost":
		return &s.cacheRead
	case "input_cost_per_token_cache_hit":
		return &s.cacheHit
	case "cache_creation_input_token_cost":
		return &s.cacheWrite
	case "cache_creation_input_token_cost_above_1hr":
		return &s.cacheWrite1h
	case "output_cost_per_reasoning_token":
		return &s.reasoning
	}
	return nil
}

// rates resolves a cell against its fallback (the standard cell for a
// service tier, the tier's short-context cell for a long-context one): a
// missing field takes the fallback's, as LiteLLM does. A cache price the
// entry never gives is the input price of the cell itself (OpenAI and Google
// bill cache writes as input: a long-context write costs long-context
// input), and a missing cache-read price is the cache-hit price when given
// (DeepSeek gives only input_cost_per_token_cache_hit). std is the entry's
// standard short-context cell.
func (s *rateSet) rates(fallback *Rates, std *rateSet) Rates {
	get := func(p *PicoUSD, fb PicoUSD) PicoUSD {
		if p != nil {
			return *p
		}
		return fb
	}
	var r Rates
	if fallback != nil {
		r = *fallback
	}
	r.Input = get(s.input, r.Input)
	r.Output = get(s.output, r.Output)
	read, stdRead := s.cacheRead, std.cacheRead
	if read == nil {
		read = s.cacheHit
	}
	if stdRead == nil {
		stdRead = std.cacheHit
	}
	if stdRead == nil {
		r.CacheRead = get(read, r.Input)
	} else {
		r.CacheRead = get(read, r.CacheRead)
	}
	if std.cacheWrite == nil {
		r.CacheWrite = get(s.cacheWrite, r.Input)
	} else {
		r.CacheWrite = get(s.cacheWrite, r.CacheWrite)
	}
	r.CacheWrite1h = get(s.cacheWrite1h, r.CacheWrite1h)
	r.Reasoning = get(s.reasoning, r.Reasoning)
	if r.Reasoning == r.Output {
		r.Reasoning = 0 // priced as output: nothing apart
	}
	return r
}

// ParseLiteLLM reads prices in the format of LiteLLM's
// model_prices_and_context_window.json: an object of model name → fields in
// dollars per token. It reads every per-token price key: input, output,
// cache read (or DeepSeek's input_cost_per_token_cache_hit), cache creation
// (5-minute) and its _above_1hr (1-hour) variant, reasoning output, each
// with its long-context (_above_Nk_tokens) and service-tier (_priority,
// _flex, _batches) variants. Entries without input and output prices
// (embeddings, images, the "sample_spec" entry) are skipped. A key that
// looks like a price and is not modelled (audio, image, per-query,
// regional uplift…) is named in the catalogue's Warnings, with how many
// models carry it — never dropped in silence. source labels the file.
func ParseLiteLLM(data []byte, source string) (*Catalogue, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object of model prices: %w", source, err)
	}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	c := New()
	unknown := map[string][]string{} // key → priced models carrying it
	onlyBy := map[string][]string{}  // key → models priced by it alone, so unpriced
	var zero []string                // models priced at zero, not marked free
	for _, name := range names {
		if name == "sample_spec" || strings.TrimSpace(name) == "" {
			continue
		}
		var fields map[string]json.RawMessage
		d := json.NewDecoder(bytes.NewReader(raw[name]))
		d.UseNumber()
		if err := d.Decode(&fields); err != nil {
			return nil, fmt.Errorf("%s: model %q: not an object of fields: %w", source, name, err)
		}
		p, skipped, ok, err := parseEntry(fields)
		if err != nil {
			return nil, fmt.Errorf("%s: model %q: %w", source, name, err)
		}
		if !ok {
			// A chat model priced only by keys Purser does not model
			// (tiered_pricing, per-second, per-character): named, and
			// remembered so that a lookup says why it is unknown.
			if len(skipped) > 0 && chatLike(fields) {
				c.setUnpriced(name, fmt.Sprintf("the table's entry %q is priced only by keys Purser does not model (%s)", name, strings.Join(skipped, ", ")))
				for _, k := range skipped {
					onlyBy[k] = append(onlyBy[k], name)
				}
			}
			continue
		}
		if p.Input == 0 && p.Output == 0 && !markedFree(name) {
			c.setUnpriced(name, fmt.Sprintf("the table's entry %q gives a zero price and the model is not marked free, so its cost is not known", name))
			zero = append(zero, name)
			continue
		}
		for _, k := range skipped {
			unknown[k] = append(unknown[k], name)
		}
		c.Set(Entry{Model: name, Price: p, Source: source})
	}
	if c.Len() == 0 && len(zero) == 0 {
		return nil, fmt.Errorf("%s: %w", source, ErrNoPrices)
	}
	c.warnings = append(c.warnings, litellmWarnings(source, unknown, onlyBy, zero)...)
	return c, nil
}

// litellmWarnings names what a LiteLLM table prices in a way Purser does
// not model: keys beside a modelled price (unknown), keys that were a
// chat model's only price (onlyBy), and models priced at zero (zero).
func litellmWarnings(source string, unknown, onlyBy map[string][]string, zero []string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(unknown)) {
		models := unknown[k]
		out = append(out, fmt.Sprintf("%s: price key %q is not modelled, so the charges it describes are not estimated (%d priced model(s), e.g. %s)",
			source, k, len(models), models[0]))
	}
	for _, k := range slices.Sorted(maps.Keys(onlyBy)) {
		models := onlyBy[k]
		out = append(out, fmt.Sprintf("%s: price key %q is not modelled, and %d chat model(s) are priced by no other key, so their cost is unknown (e.g. %s)",
			source, k, len(models), models[0]))
	}
	if len(zero) > 0 {
		out = append(out, fmt.Sprintf("%s: %d model(s) have a zero price and are not marked free (\":free\"), so their cost is unknown, never $0 (e.g. %s)",
			source, len(zero), zero[0]))
	}
	return out
}

// chatLike is an entry for a model an agent talks to: LiteLLM's chat,
// completion and responses modes, or no mode at all.
func chatLike(fields map[string]json.RawMessage) bool {
	var mode string
	if raw, ok := fields["mode"]; ok && json.Unmarshal(raw, &mode) != nil {
		return false
	}
	switch mode {
	case "", "chat", "completion", "responses":
		return true
	}
	return false
}

// markedFree is a model whose name says it costs nothing: OpenRouter's
// ":free" variants and free router, and models run locally (Ollama, LM
// Studio, llamafile). Any other zero price is a gap in the table, not a
// price.
func markedFree(name string) bool {
	n := strings.ToLower(name)
	if strings.HasSuffix(n, ":free") || strings.HasSuffix(n, "/free") {
		return true
	}
	for _, local := range []string{"ollama/", "ollama_chat/", "lm_studio/", "llamafile/"} {
		if strings.HasPrefix(n, local) {
			return true
		}
	}
	return false
}

// parseEntry reads one model's fields. ok is false for an entry with no
// input or output price. skipped lists the keys that look like prices and
// are not modelled (zero-valued ones excepted: they add nothing to a bill).
func parseEntry(fields map[string]json.RawMessage) (p Price, skipped []string, ok bool, err error) {
	type cell = cellKey
	cells := map[cell]*rateSet{}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		m := priceKey.FindStringSubmatch(key)
		if m == nil {
			if looksLikePrice(key) && !isZero(fields[key]) {
				skipped = append(skipped, key)
			}
			continue
		}
		var above int64
		if m[2] != "" {
			k, perr := strconv.ParseInt(m[2], 10, 64)
			if perr != nil || k <= 0 || k > math.MaxInt64/1000 {
				return p, nil, false, fmt.Errorf("%s: threshold %q out of range", key, m[2])
			}
			above = k * 1000
		}
		service := m[3]
		if service == "batches" {
			service = ServiceBatch
		}
		var num json.Number
		if uerr := json.Unmarshal(fields[key], &num); uerr != nil {
			return p, nil, false, fmt.Errorf("%s: want a number of dollars per token, got %s", key, fields[key])
		}
		v, perr := parsePerToken(string(num))
		if perr != nil {
			return p, nil, false, fmt.Errorf("%s: %w", key, perr)
		}
		cl := cell{above, service}
		if cells[cl] == nil {
			cells[cl] = &rateSet{}
		}
		*cells[cl].field(m[1]) = &v
	}
	std := cells[cell{}]
	if std == nil || std.input == nil || std.output == nil {
		return p, skipped, false, nil
	}
	base := std.rates(nil, std)
	p = priceOf(base, tiersOf(cells, "", base, std, nil))
	services := map[string]bool{}
	for cl := range cells {
		if cl.service != "" {
			services[cl.service] = true
		}
	}
	for s := range services {
		sc := cells[cell{0, s}]
		if sc == nil || sc.input == nil {
			// Only long-context rates for this tier, or no input price: the
			// tier cannot be priced from this entry.
			skipped = append(skipped, fmt.Sprintf("%s-tier rates without a short-context input price", s))
			continue
		}
		sBase := sc.rates(&base, std)
		sp := priceOf(sBase, tiersOf(cells, s, sBase, std, p.Tiers))
		if p.Services == nil {
			p.Services = map[string]*Price{}
		}
		p.Services[s] = &sp
	}
	return p, skipped, true, nil
}

// tiersOf returns a service tier's long-context tiers, ascending. A field a
// tier omits falls back to the standard long-context rates at the same
// threshold when the table gives them (a priority long-context cell without a
// cache-read price is billed the long-context cache read, as LiteLLM reads
// it), else to the tier's short-context rates.
func tiersOf(cells map[cellKey]*rateSet, service string, short Rates, std *rateSet, stdTiers []Tier) []Tier {
	var out []Tier
	for cl, rs := range cells {
		if cl.service == service && cl.above > 0 {
			fallback := short
			for _, t := range stdTiers {
				if t.AboveInput == cl.above {
					fallback = t.Rates
				}
			}
			out = append(out, Tier{AboveInput: cl.above, Rates: rs.rates(&fallback, std)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AboveInput < out[j].AboveInput })
	return out
}

func priceOf(r Rates, tiers []Tier) Price {
	return Price{Input: r.Input, Output: r.Output, CacheRead: r.CacheRead, CacheWrite: r.CacheWrite, CacheWrite1h: r.CacheWrite1h, Reasoning: r.Reasoning, Tiers: tiers}
}

func isZero(raw json.RawMessage) bool {
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return false
	}
	f, err := n.Float64()
	return err == nil && f == 0
}

// LoadLiteLLM reads a price file in LiteLLM's format (see ParseLiteLLM),
// labelled with its path and the SHA-256 of its contents.
func LoadLiteLLM(path string) (*Catalogue, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return ParseLiteLLM(data, FileSource(path, data))
}

// FileSource labels a price file: its path and the SHA-256 of its bytes, so
// an estimate says exactly which table priced it.
func FileSource(path string, data []byte) string {
	sum := sha256.Sum256(data)
	return fmt.Sprintf("file %s sha256:%s", path, hex.EncodeToString(sum[:]))
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

// groupDigits writes 200000 as 200,000.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
