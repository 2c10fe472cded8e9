package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/report"
)

// pricesUsage is the usage `purser prices` prices, from its flags.
type pricesUsage struct {
	input, output, cacheRead, cacheWrite, cacheWrite1h, reasoning int64
	service                                                       string
}

func newPricesCmd() *cobra.Command {
	var pricingPath, routeName string
	var asJSON bool
	var u pricesUsage
	cmd := &cobra.Command{
		Use:   "prices MODEL [--pricing FILE] [--route ROUTE] [--json] [--input N --output N --cache-read N --cache-write N --cache-write-1h N --reasoning N --service-tier TIER]",
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
			route, err := pricing.ParseRoute(routeName)
			if err != nil {
				return badInput(fmt.Errorf("--route: %w", err))
			}
			out := report.DescribePrices(prices, ev, route)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			return out.Write(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&pricingPath, "pricing", "", "prices in LiteLLM's model_prices_and_context_window.json format, over the built-in ones")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	f.StringVar(&routeName, "route", "", "the route the call takes, which decides the entry a name resolves to (e.g. openrouter, vertex, bedrock; default: not known)")
	f.Int64Var(&u.input, "input", 0, "input tokens, cached ones included")
	f.Int64Var(&u.output, "output", 0, "output tokens, reasoning included")
	f.Int64Var(&u.cacheRead, "cache-read", 0, "input tokens read from the cache")
	f.Int64Var(&u.cacheWrite, "cache-write", 0, "input tokens written to the cache")
	f.Int64Var(&u.cacheWrite1h, "cache-write-1h", 0, "of the cache writes, those held for one hour")
	f.Int64Var(&u.reasoning, "reasoning", 0, "of the output tokens, reasoning ones")
	f.StringVar(&u.service, "service-tier", "", "standard (default), priority, flex or batch")
	return cmd
}
