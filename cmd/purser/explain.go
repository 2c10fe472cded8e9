package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/report"
)

func newExplainCmd() *cobra.Command {
	var db string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "explain TASK [--db PATH] [--json]",
		Short: "Say in plain words why a task is in its tier, what was degraded and what to do next",
		Long: `Explains a task from the database: its state and budget tier, which metric
put it there (each metric against its lines), what each sub-agent spent (when
one spent any), the degrade actions taken and why, the validators' last
results, and what to do next.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeTaskIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := openHere(cmd, db)
			if err != nil {
				return err
			}
			defer a.Close()
			store := a.Store
			where := a.DB
			e, err := report.ReadExplanation(cmd.Context(), store, args[0], proc.Owners{}.Gone)
			if errors.Is(err, purser.ErrNotFound) {
				return badInput(fmt.Errorf("no task %q in %s", args[0], where))
			}
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(e.JSON())
			}
			return e.Write(cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&db, "db", "", app.DBFlagHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {id, state, reason, budget, degrades, iteration, validators, budgetChanges, agents} as JSON")
	return cmd
}
