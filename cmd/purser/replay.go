package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/replay"
	"github.com/purser-dev/purser/report"
)

// loadCorpus reads runs from a corpus file, or from Purser's database.
func loadCorpus(ctx context.Context, args []string, fromDB bool, db string) ([]replay.Run, error) {
	switch {
	case fromDB && len(args) > 0:
		return nil, badInput(fmt.Errorf("give a corpus file or --from-db, not both"))
	case fromDB:
		a, err := app.Open(ctx, app.Options{DB: db})
		if err != nil {
			return nil, err
		}
		defer a.Close()
		store := a.Store
		return replay.FromStore(ctx, store)
	case len(args) != 1:
		return nil, badInput(fmt.Errorf("give one corpus file (JSON Lines), or --from-db"))
	}
	runs, err := replay.ParseFile(args[0])
	if err != nil {
		return nil, badInput(err)
	}
	return runs, nil
}

func newReplayCmd() *cobra.Command {
	var budgetPath, pricingPath, db string
	var asJSON, fromDB bool
	cmd := &cobra.Command{
		Use:   "replay --budget FILE (CORPUS.jsonl | --from-db) [--json]",
		Short: "Replay recorded agent runs through a budget: what it would have cost and cut",
		Long: `Replays recorded runs through a budget, call by call, with admission checked
before each call as the engine does: a call that would pass a hard cap is not
made, and the run stops there. For each run: the call at which it would have
entered WARNING and been stopped, the spend recorded and the spend under the
budget, and whether a solved run would have been cut. Runs with totals only
are replayed as one call clamped to the cap (in exact integer arithmetic) and
counted as stopped whenever their total reaches the cap; their saving, total −
cap, is a lower bound (admission would have stopped them at or below the cap)
and their stop point is unknown.

The corpus format is that of ../shared/replay/replay.jsonl; --from-db replays
Purser's own history instead.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if budgetPath == "" {
				return badInput(fmt.Errorf("--budget is required"))
			}
			cfg, err := config.LoadBudget(budgetPath)
			if err != nil {
				return badInput(err)
			}
			prices, err := loadPrices(pricingPath)
			if err != nil {
				return badInput(err)
			}
			runs, err := loadCorpus(cmd.Context(), args, fromDB, db)
			if err != nil {
				return err
			}
			rep, err := replay.Replay(cfg, prices, runs)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
			}
			return report.WriteReplay(cmd.OutOrStdout(), rep)
		},
	}
	cmd.Flags().StringVar(&budgetPath, "budget", "", "budget file, YAML or JSON (required)")
	cmd.Flags().StringVar(&pricingPath, "pricing", "", "prices in LiteLLM's format, for calls with no recorded cost")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {summary, groups, runs} as JSON")
	cmd.Flags().BoolVar(&fromDB, "from-db", false, "replay Purser's own history instead of a corpus")
	cmd.Flags().StringVar(&db, "db", "", "database path, with --from-db")
	return cmd
}
