package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser/advise"
	"github.com/purser-dev/purser/budget"
)

func newAdviseCmd() *cobra.Command {
	var pricingPath, db, plot string
	var asJSON bool
	var fromDB bool
	cmd := &cobra.Command{
		Use:   "advise (CORPUS.jsonl | --from-db) [--plot FILE.svg]",
		Short: "Propose budgets from recorded runs, with the trade-off of candidate hard caps",
		Long: `Proposes optimal / warning / hard per metric for each system and model in the
history: optimal near the median of solved runs, warning near their 75th
percentile, hard near their 95th. For a handful of candidate hard caps it shows,
replayed with admission, the money saved against the solved runs cut; then a
chart of the distribution, and the proposal as a budget. --plot writes the
distribution of solved and unsolved runs with the proposed lines as SVG.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prices, err := loadPrices(pricingPath)
			if err != nil {
				return badInput(err)
			}
			runs, err := loadCorpus(cmd.Context(), args, fromDB, db)
			if err != nil {
				return err
			}
			if len(runs) == 0 {
				return badInput(fmt.Errorf("no runs to advise from"))
			}
			groups, err := advise.Advise(prices, runs)
			if err != nil {
				return err
			}
			for _, g := range groups {
				if asJSON {
					continue
				}
				if err := advise.WriteText(cmd.OutOrStdout(), g); err != nil {
					return err
				}
			}
			if plot != "" {
				f, err := os.Create(plot)
				if err != nil {
					return err
				}
				if err := advise.WriteSVG(f, groups); err != nil {
					f.Close()
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
				if !asJSON {
					fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", plot)
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(adviceJSON(groups))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&pricingPath, "pricing", "", "prices in LiteLLM's format, for calls with no recorded cost")
	cmd.Flags().BoolVar(&fromDB, "from-db", false, "advise from Purser's own history instead of a corpus")
	cmd.Flags().StringVar(&db, "db", "", "database path, with --from-db")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {groups: [{system, model, runs, solved, budget, maxIterationsIsDefault, tradeOff}]} as JSON")
	cmd.Flags().StringVar(&plot, "plot", "", "write the distribution with the proposed lines to this SVG file")
	return cmd
}

// adviceGroupJSON is one group's advice as advise --json prints it; the
// proposed budget's maxIterations is a default (advise.DefaultMaxIterations),
// not read from the runs, and says so.
type adviceGroupJSON struct {
	System                 string                `json:"system"`
	Model                  string                `json:"model"`
	Runs                   int                   `json:"runs"`
	Solved                 int                   `json:"solved"`
	TooFew                 bool                  `json:"tooFew"`
	TotalsOnly             bool                  `json:"totalsOnly"`
	Basis                  string                `json:"basis"`
	Budget                 *budget.Config        `json:"budget"` // null when TooFew
	MaxIterationsIsDefault bool                  `json:"maxIterationsIsDefault"`
	TradeOff               []adviceCandidateJSON `json:"tradeOff"`
}

// adviceCandidateJSON is one hard cap of the trade-off, in its metric's
// unit (dollars exact, as a decimal, for money).
type adviceCandidateJSON struct {
	Basis     string      `json:"basis"`
	Metric    string      `json:"metric"`
	Cap       json.Number `json:"cap"`
	Stopped   int         `json:"stopped"`
	SolvedCut int         `json:"solvedCut"`
	SavedUSD  budget.USD  `json:"savedUsd"`
	SpentUSD  budget.USD  `json:"spentUsd"`
}

func adviceJSON(groups []advise.Group) any {
	out := []adviceGroupJSON{}
	for _, g := range groups {
		j := adviceGroupJSON{System: g.System, Model: g.Model, Runs: g.Runs, Solved: g.Solved, TooFew: g.TooFew, TotalsOnly: g.TotalsOnly, Basis: g.Basis, TradeOff: []adviceCandidateJSON{}}
		if !g.TooFew && len(g.Proposals) > 0 {
			cfg := advise.Config(g.Proposals, advise.DefaultMaxIterations)
			j.Budget, j.MaxIterationsIsDefault = &cfg, true
		}
		for _, c := range g.TradeOff {
			if len(g.Proposals) == 0 {
				break
			}
			metric := g.Proposals[0].Metric
			capValue := json.Number(fmt.Sprint(c.Cap))
			if metric == budget.Money {
				capValue = json.Number(budget.USD(c.Cap).Decimal())
			}
			j.TradeOff = append(j.TradeOff, adviceCandidateJSON{Basis: c.Basis, Metric: metric.String(), Cap: capValue, Stopped: c.Stopped, SolvedCut: c.SolvedCut, SavedUSD: c.SavedUSD, SpentUSD: c.SpentUSD})
		}
		out = append(out, j)
	}
	return struct {
		Groups []adviceGroupJSON `json:"groups"`
	}{out}
}
