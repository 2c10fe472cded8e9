package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/report"
)

func newBudgetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "budget",
		Short: "Check budgets and usage against the three-tier model",
	}
	cmd.AddCommand(newBudgetEvalCmd())
	return cmd
}

func newBudgetEvalCmd() *cobra.Command {
	var budgetPath, eventsPath, pricingPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "eval --budget FILE --events FILE [--pricing FILE] [--json]",
		Short: "Replay usage events through a budget and print the final status",
		Long: `Replays usage events (JSON Lines) through a budget (YAML or JSON in the
spec's TaskBudgetConfig shape) and prints the final budget status.

Each event line may have: inputTokens, outputTokens, cacheReadTokens,
cacheWriteTokens, costUsd, model, elapsedMs, iterationEnd. An event with
costUsd is reported; without it, it is estimated from the model's price,
or unknown when the model has no price.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadBudget(budgetPath)
			if err != nil {
				return badInput(err)
			}
			prices, err := loadPrices(pricingPath)
			if err != nil {
				return badInput(err)
			}
			f, err := os.Open(eventsPath)
			if err != nil {
				return badInput(fmt.Errorf("events: %w", err))
			}
			defer f.Close()
			// The clock never runs: time comes only from the events' elapsedMs.
			m, err := budget.NewManager(cfg, budget.Options{})
			if err != nil {
				return badInput(err)
			}
			// Streamed: a file of millions of events costs flat memory.
			if err := config.EachEvent(eventsPath, f, prices, func(ev budget.UsageEvent) error {
				m.RecordUsage(ev)
				return nil
			}); err != nil {
				return badInput(err)
			}
			st := m.Status()
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				return enc.Encode(st)
			}
			return report.StatusTable(cmd.OutOrStdout(), cfg, st)
		},
	}
	cmd.Flags().StringVar(&budgetPath, "budget", "", "budget file, YAML or JSON (required)")
	cmd.Flags().StringVar(&eventsPath, "events", "", "usage events, JSON Lines (required)")
	cmd.Flags().StringVar(&pricingPath, "pricing", "", "prices in LiteLLM's model_prices_and_context_window.json format, over the built-in ones")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as one JSON object")
	_ = cmd.MarkFlagRequired("budget")
	_ = cmd.MarkFlagRequired("events")
	return cmd
}

// loadPrices returns the built-in catalogue, overridden by a LiteLLM-format
// file when one is given.
func loadPrices(path string) (*pricing.Catalogue, error) {
	prices := pricing.Builtin()
	if path == "" {
		return prices, nil
	}
	file, err := pricing.LoadLiteLLM(path)
	if err != nil {
		return nil, fmt.Errorf("pricing: %w", err)
	}
	prices.Merge(file)
	warnPrices(prices)
	return prices, nil
}

// warnPrices prints, on stderr, the price keys a table holds that Purser
// does not model: charges that will not be estimated are named, not hidden.
func warnPrices(prices *pricing.Catalogue) {
	for _, w := range prices.Warnings() {
		fmt.Fprintln(os.Stderr, "purser: warning:", w)
	}
}
