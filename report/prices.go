package report

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

// PriceReport is what `purser prices` prints: how a model name resolves,
// its rates, and what a usage would cost.
type PriceReport struct {
	Model     string                  `json:"model"`
	Known     bool                    `json:"known"`
	Tried     []string                `json:"tried"`
	Key       string                  `json:"key,omitempty"`
	Alias     bool                    `json:"matchedDecoratedKey,omitempty"`
	Source    string                  `json:"source,omitempty"`
	Base      *RatesPerMillion        `json:"base,omitempty"`
	Tiers     []TierPerMillion        `json:"longContextTiers,omitempty"`
	Services  map[string]ServiceRates `json:"serviceTiers,omitempty"`
	Why       string                  `json:"whyUnknown,omitempty"`
	Usage     *UsageCost              `json:"usage,omitempty"`
	ReadOn    string                  `json:"builtinReadOn"`
	Reference string                  `json:"builtinReference"`
}

// RatesPerMillion are rates in exact dollars per million tokens.
type RatesPerMillion struct {
	Input        string `json:"input"`
	Output       string `json:"output"`
	CacheRead    string `json:"cacheRead"`
	CacheWrite   string `json:"cacheWrite"`
	CacheWrite1h string `json:"cacheWrite1h,omitempty"`
	Reasoning    string `json:"reasoning,omitempty"`
}

// TierPerMillion is a long-context tier's rates.
type TierPerMillion struct {
	AboveInputTokens int64           `json:"aboveInputTokens"`
	Rates            RatesPerMillion `json:"rates"`
}

// ServiceRates are a service tier's rates.
type ServiceRates struct {
	Base  RatesPerMillion  `json:"base"`
	Tiers []TierPerMillion `json:"longContextTiers,omitempty"`
}

// UsageCost is what a usage would cost, and which rates priced it.
type UsageCost struct {
	Event       budget.UsageEvent `json:"-"`
	USD         string            `json:"usd"`
	CostSource  string            `json:"costSource"`
	PriceSource string            `json:"priceSource"`
}

// DescribePrices resolves ev.Model in c, as a call on route would (the
// zero Route: the route is not known), and prices ev when it has tokens.
func DescribePrices(c *pricing.Catalogue, ev budget.UsageEvent, route pricing.Route) PriceReport {
	e, r, ok := c.ResolveRoute(ev.Model, route)
	out := PriceReport{Model: ev.Model, Known: ok, Tried: r.Tried, ReadOn: pricing.BuiltinReadOn, Reference: pricing.BuiltinReference}
	switch {
	case !ok && r.Unpriced != "":
		// The table names the model but cannot price it: say why, rather
		// than that it has no such entry.
		out.Why = fmt.Sprintf("the price table names it but cannot price it: %s. Give its prices under prices: in purser.yaml, or a LiteLLM-format file with --pricing", r.Unpriced)
	case !ok:
		out.Why = fmt.Sprintf("no entry of the price table is any of the names tried (%s), nor a provider-decorated form of one; "+
			"Purser never prices a model as another whose name it merely starts with. Give its prices under prices: in purser.yaml, or a LiteLLM-format file with --pricing",
			strings.Join(r.Tried, ", "))
	default:
		out.Key, out.Alias, out.Source = e.Model, r.Alias, e.Source
		base := perMillionRates(e.Price.Base())
		out.Base = &base
		out.Tiers = perMillionTiers(e.Price.Tiers)
		for name, sp := range e.Price.Services {
			if out.Services == nil {
				out.Services = map[string]ServiceRates{}
			}
			out.Services[name] = ServiceRates{Base: perMillionRates(sp.Base()), Tiers: perMillionTiers(sp.Tiers)}
		}
	}
	if ev.Tokens() > 0 {
		priced := c.EstimateRoute(ev, route)
		uc := UsageCost{Event: priced, CostSource: priced.CostSource.String(), PriceSource: priced.PriceSource, USD: "unknown"}
		if priced.CostSource == budget.CostEstimated {
			uc.USD = priced.USD.Decimal()
		}
		out.Usage = &uc
	}
	return out
}

func perMillionTiers(tiers []pricing.Tier) []TierPerMillion {
	var out []TierPerMillion
	for _, t := range tiers {
		out = append(out, TierPerMillion{AboveInputTokens: t.AboveInput, Rates: perMillionRates(t.Rates)})
	}
	return out
}

func perMillionRates(r pricing.Rates) RatesPerMillion {
	out := RatesPerMillion{Input: perMillion(r.Input), Output: perMillion(r.Output), CacheRead: perMillion(r.CacheRead), CacheWrite: perMillion(r.CacheWrite)}
	if r.CacheWrite1h > 0 {
		out.CacheWrite1h = perMillion(r.CacheWrite1h)
	}
	if r.Reasoning > 0 {
		out.Reasoning = perMillion(r.Reasoning)
	}
	return out
}

// perMillion writes a per-token price in pico-dollars as exact dollars per
// million tokens: 3_750_000 → "3.75".
func perMillion(p pricing.PicoUSD) string {
	whole, frac := int64(p)/1_000_000, int64(p)%1_000_000
	if frac == 0 {
		return strconv.FormatInt(whole, 10)
	}
	return strconv.FormatInt(whole, 10) + "." + strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
}

// Write prints the report for people.
func (r PriceReport) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "model:    %s\n", r.Model)
	fmt.Fprintf(&b, "tried:    %s\n", strings.Join(r.Tried, ", "))
	if !r.Known {
		fmt.Fprintf(&b, "price:    unknown\nwhy:      %s\n", r.Why)
	} else {
		alias := ""
		if r.Alias {
			alias = " (a provider-decorated key of the same model)"
		}
		fmt.Fprintf(&b, "priced as %s%s\nfrom:     %s\n", r.Key, alias, r.Source)
		b.WriteString("rates, dollars per million tokens (input / output / cache read / cache write 5m / cache write 1h):\n")
		fmt.Fprintf(&b, "  standard:                %s\n", r.Base.line())
		for _, t := range r.Tiers {
			fmt.Fprintf(&b, "  standard, input > %-7d %s\n", t.AboveInputTokens, t.Rates.line())
		}
		names := make([]string, 0, len(r.Services))
		for n := range r.Services {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			s := r.Services[n]
			fmt.Fprintf(&b, "  %-24s %s\n", n+":", s.Base.line())
			for _, t := range s.Tiers {
				fmt.Fprintf(&b, "  %-24s %s\n", fmt.Sprintf("%s, input > %d", n, t.AboveInputTokens), t.Rates.line())
			}
		}
	}
	if r.Usage != nil {
		usd := r.Usage.USD
		if usd != "unknown" {
			usd = "$" + usd
		}
		fmt.Fprintf(&b, "usage costs: %s (%s)\n  %s\n", usd, r.Usage.CostSource, r.Usage.PriceSource)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r RatesPerMillion) line() string {
	w1h := r.CacheWrite1h
	if w1h == "" {
		w1h = "—"
	}
	s := fmt.Sprintf("%s / %s / %s / %s / %s", r.Input, r.Output, r.CacheRead, r.CacheWrite, w1h)
	if r.Reasoning != "" {
		s += " (reasoning " + r.Reasoning + ")"
	}
	return s
}
