package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/tui"
)

// taskStatusJSON is one task in `purser status --json`.
type taskStatusJSON struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Interrupted is true for a RUNNING task whose process is gone (it was
	// killed): `purser resume` continues it.
	Interrupted bool          `json:"interrupted"`
	Reason      string        `json:"reason"`
	RunID       string        `json:"runId"`
	Workspace   string        `json:"workspace"`
	Budget      budget.Status `json:"budget"`
	// Prices says which price tables and rates priced the task's estimates
	// (or why a model had none), per source; empty when every figure was
	// reported.
	Prices []priceSourceJSON `json:"prices"`
}

// priceSourceJSON is one price table and its rates, and what it priced.
type priceSourceJSON struct {
	Source     string `json:"source"`
	CostSource string `json:"costSource"` // estimated, list or unknown
	Events     int64  `json:"events"`
	Tokens     int64  `json:"tokens"`
	// USD is what it priced, exact; null when the cost was unknown.
	USD *budget.USD `json:"usd"`
}

func pricesJSON(prices []purser.PriceSourceUsage) []priceSourceJSON {
	out := make([]priceSourceJSON, 0, len(prices))
	for _, p := range prices {
		j := priceSourceJSON{Source: p.Source, CostSource: p.CostSource.String(), Events: p.Events, Tokens: p.Tokens}
		if p.CostSource != budget.CostUnknown {
			usd := p.USD
			j.USD = &usd
		}
		out = append(out, j)
	}
	return out
}

func newStatusCmd() *cobra.Command {
	var db string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [TASK] [--db PATH] [--json]",
		Short: "Show tasks, their state and their budget",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := openHere(cmd, db)
			if err != nil {
				return err
			}
			defer a.Close()
			store := a.Store
			where := a.DB
			var recs []purser.TaskRecord
			if len(args) == 1 {
				rec, err := store.Task(cmd.Context(), args[0])
				if errors.Is(err, purser.ErrNotFound) {
					return badInput(fmt.Errorf("no task %q in %s", args[0], where))
				}
				if err != nil {
					return err
				}
				recs = append(recs, rec)
			} else if recs, err = store.Tasks(cmd.Context()); err != nil {
				return err
			}
			out := struct {
				Database string           `json:"database"`
				Tasks    []taskStatusJSON `json:"tasks"`
			}{Database: app.ShownDatabase(where.Path), Tasks: []taskStatusJSON{}}
			for _, rec := range recs {
				totals, err := store.UsageTotals(cmd.Context(), rec.ID)
				if err != nil {
					return err
				}
				totals.Time = rec.Elapsed
				m, err := budget.NewManager(rec.Budget, budget.Options{Initial: totals})
				if err != nil {
					return fmt.Errorf("task %s: %w", rec.ID, err)
				}
				interrupted := rec.State == purser.StateRunning && proc.Owners{}.Gone(rec.Owner)
				reason := rec.Reason
				if interrupted {
					reason = "interrupted: the process running it is gone; purser resume " + rec.ID + " continues it"
				}
				prices, err := store.PriceSources(cmd.Context(), rec.ID)
				if err != nil {
					return err
				}
				out.Tasks = append(out.Tasks, taskStatusJSON{ID: rec.ID, Status: string(rec.State), Interrupted: interrupted, Reason: reason,
					RunID: rec.RunID, Workspace: rec.Workspace, Budget: m.Status(), Prices: pricesJSON(prices)})
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "database: %s\n", where)
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK\tSTATE\tBUDGET\tWHY")
			for _, t := range out.Tasks {
				state := t.Status
				if t.Interrupted {
					state += " (interrupted)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, state, tui.Summary(t.Budget), t.Reason)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&db, "db", "", app.DBFlagHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {\"database\": PATH, \"tasks\": [...]} as JSON")
	return cmd
}
