package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser/advise"
)

func newAdviseCmd() *cobra.Command {
	var pricingPath, db, plot string
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
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", plot)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&pricingPath, "pricing", "", "prices in LiteLLM's format, for calls with no recorded cost")
	cmd.Flags().BoolVar(&fromDB, "from-db", false, "advise from Purser's own history instead of a corpus")
	cmd.Flags().StringVar(&db, "db", "", "database path, with --from-db")
	cmd.Flags().StringVar(&plot, "plot", "", "write the distribution with the proposed lines to this SVG file")
	return cmd
}
