package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

// pricesUsage is the usage `purser prices` prices, from its flags.
type pricesUsage struct {
	input, output, cacheRead, cacheWrite, cacheWrite1h, reasoning int64
	service                                                       string
}

func newPricesCmd() *cobra.Command {
	var pricingPath string
	var asJSON bool
	var u pricesUsage
	cmd := &cobra.Command{
		Use:   "prices MODEL [--pricing FILE] [--json] [--input N --output N --cache-read N --cache-write N --cache-write-1h N --reasoning N --service-tier TIER]",
		Short: "Show how a model name resolves, its rates, and what a usage would cost",
		Long: `Shows which price-table entry a model name resolves to (and every name tried),
the table it comes from (built-in with its date, or a file with its SHA-256),
its rates in dollars per million tokens (base, long-context tiers, service tiers),
and — given token counts — what that usage would cost and which rates apply.
An unknown model is explained: the names tried, none of which the table holds.

Token counts follow Purser's events: --input counts every prompt token, the
cached ones included; --cache-read, --cache-write (and --cache-write-1h, the
part of the writes held for one hour) are parts of it; --reasoning is part of
--output.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prices := pricing.Builtin()
			if pricingPath != "" {
				file, err := pricing.LoadLiteLLM(pricingPath)
				if err != nil {
					return badInput(fmt.Errorf("pricing: %w", err))
				}
				prices.Merge(file)
			}
			for _, w := range prices.Warnings() {
				fmt.Fprintln(cmd.ErrOrStderr(), "purser: warning:", w)
			}
			ev := budget.UsageEvent{Model: args[0], InputTokens: u.input, OutputTokens: u.output, CacheReadTokens: u.cacheRead,
				CacheWriteTokens: u.cacheWrite, CacheWrite1hTokens: u.cacheWrite1h, ReasoningTokens: u.reasoning, ServiceTier: u.service}
			if err := ev.Validate(); err != nil {
				return badInput(fmt.Errorf("usage: %w", err))
			}
			out := describePrices(prices, ev)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			return out.write(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&pricingPath, "pricing", "", "prices in LiteLLM's model_prices_and_context_window.json format, over the built-in ones")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	f.Int64Var(&u.input, "input", 0, "input tokens, cached ones included")
	f.Int64Var(&u.output, "output", 0, "output tokens, reasoning included")
	f.Int64Var(&u.cacheRead, "cache-read", 0, "input tokens read from the cache")
	f.Int64Var(&u.cacheWrite, "cache-write", 0, "input tokens written to the cache")
	f.Int64Var(&u.cacheWrite1h, "cache-write-1h", 0, "of the cache writes, those held for one hour")
	f.Int64Var(&u.reasoning, "reasoning", 0, "of the output tokens, reasoning ones")
	f.StringVar(&u.service, "service-tier", "", "standard (default), priority, flex or batch")
	return cmd
}

// priceReport is what `purser prices` prints.
type priceReport struct {
	Model     string              `json:"model"`
	Known     bool                `json:"known"`
	Tried     []string            `json:"tried"`
	Key       string              `json:"key,omitempty"`
	Alias     bool                `json:"matchedDecoratedKey,omitempty"`
	Source    string              `json:"source,omitempty"`
	Base      *ratesPerMillion    `json:"base,omitempty"`
	Tiers     []tierPerMillion    `json:"longContextTiers,omitempty"`
	Services  map[string]svcRates `json:"serviceTiers,omitempty"`
	Why       string              `json:"whyUnknown,omitempty"`
	Usage     *usageCost          `json:"usage,omitempty"`
	ReadOn    string              `json:"builtinReadOn"`
	Reference string              `json:"builtinReference"`
}

type ratesPerMillion struct {
	Input        string `json:"input"`
	Output       string `json:"output"`
	CacheRead    string `json:"cacheRead"`
	CacheWrite   string `json:"cacheWrite"`
	CacheWrite1h string `json:"cacheWrite1h,omitempty"`
	Reasoning    string `json:"reasoning,omitempty"`
}

type tierPerMillion struct {
	AboveInputTokens int64           `json:"aboveInputTokens"`
	Rates            ratesPerMillion `json:"rates"`
}

type svcRates struct {
	Base  ratesPerMillion  `json:"base"`
	Tiers []tierPerMillion `json:"longContextTiers,omitempty"`
}

type usageCost struct {
	Event       budget.UsageEvent `json:"-"`
	USD         string            `json:"usd"`
	CostSource  string            `json:"costSource"`
	PriceSource string            `json:"priceSource"`
}

func describePrices(c *pricing.Catalogue, ev budget.UsageEvent) priceReport {
	e, r, ok := c.Resolve(ev.Model)
	out := priceReport{Model: ev.Model, Known: ok, Tried: r.Tried, ReadOn: pricing.BuiltinReadOn, Reference: pricing.BuiltinReference}
	if !ok {
		out.Why = fmt.Sprintf("no entry of the price table is any of the names tried (%s), nor a provider-decorated form of one; "+
			"Purser never prices a model as another whose name it merely starts with. Give its prices under prices: in purser.yaml, or a LiteLLM-format file with --pricing",
			strings.Join(r.Tried, ", "))
	} else {
		out.Key, out.Alias, out.Source = e.Model, r.Alias, e.Source
		base := perMillionRates(e.Price.Base())
		out.Base = &base
		out.Tiers = perMillionTiers(e.Price.Tiers)
		for name, sp := range e.Price.Services {
			if out.Services == nil {
				out.Services = map[string]svcRates{}
			}
			out.Services[name] = svcRates{Base: perMillionRates(sp.Base()), Tiers: perMillionTiers(sp.Tiers)}
		}
	}
	if ev.Tokens() > 0 {
		priced := c.Estimate(ev)
		uc := usageCost{Event: priced, CostSource: priced.CostSource.String(), PriceSource: priced.PriceSource, USD: "unknown"}
		if priced.CostSource == budget.CostEstimated {
			uc.USD = priced.USD.Decimal()
		}
		out.Usage = &uc
	}
	return out
}

func perMillionTiers(tiers []pricing.Tier) []tierPerMillion {
	var out []tierPerMillion
	for _, t := range tiers {
		out = append(out, tierPerMillion{AboveInputTokens: t.AboveInput, Rates: perMillionRates(t.Rates)})
	}
	return out
}

func perMillionRates(r pricing.Rates) ratesPerMillion {
	out := ratesPerMillion{Input: perMillion(r.Input), Output: perMillion(r.Output), CacheRead: perMillion(r.CacheRead), CacheWrite: perMillion(r.CacheWrite)}
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

func (r priceReport) write(w io.Writer) error {
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

func (r ratesPerMillion) line() string {
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
