package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/report"
)

func newBudgetsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "budgets",
		Short: "Named budgets that runs draw from: a team's month, a repository's day",
		Long: `A named budget has the three tiers over money and tokens, reset on a calendar
window (day, week from Monday, or month; UTC unless --zone names another). A run
draws from named budgets with purser run --draw-from NAME,...: each of its
calls is admitted only if it fits in its task, its run and every named budget
it draws from, and a named budget's spend is the ledger of every run drawing
from it inside the current window.`,
	}
	cmd.AddCommand(newBudgetsCreateCmd(), newBudgetsShowCmd(), newBudgetsRaiseCmd())
	return cmd
}

// openBudgets opens the project's database (--db, PURSER_DB or
// purser.yaml's database:); create makes a new one where none is.
func openBudgets(cmd *cobra.Command, db string, create bool) (*app.App, error) {
	return app.Open(cmd.Context(), app.Options{DB: db, Create: create, Backends: backends(), LoadTask: loadTask, Stderr: cmd.ErrOrStderr()})
}

func newBudgetsCreateCmd() *cobra.Command {
	var db, file, window, zone string
	cmd := &cobra.Command{
		Use:   "create NAME --file BUDGET.yaml --window day|week|month [--zone ZONE]",
		Short: "Create a named budget",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return badInput(errors.New("--file: a budget file (YAML or JSON) is required"))
			}
			w, err := purser.ParseBudgetWindow(window)
			if err != nil {
				return badInput(fmt.Errorf("--window: %w", err))
			}
			cfg, err := config.LoadNamedBudget(file)
			if err != nil {
				return badInput(err)
			}
			b := purser.NamedBudget{Name: args[0], Budget: cfg, Window: w, Zone: zone, CreatedAt: time.Now()}
			if err := b.Validate(); err != nil {
				return badInput(fmt.Errorf("named budget: %w", err))
			}
			a, err := openBudgets(cmd, db, true)
			if err != nil {
				return err
			}
			defer a.Close()
			s := a.Store
			if err := s.CreateBudget(cmd.Context(), b); err != nil {
				if errors.Is(err, purser.ErrBudgetExists) {
					return badInput(fmt.Errorf("named budget %s exists; change it with purser budgets raise %s --file FILE", b.Name, b.Name))
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created named budget %s: %s per %s%s\n", b.Name, report.CapsText(b.Caps()), b.Window, report.ZoneText(b.Zone))
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", app.DBFlagHelp)
	cmd.Flags().StringVar(&file, "file", "", "the budget file (YAML or JSON): optimal/warning/hard over usd and tokens")
	cmd.Flags().StringVar(&window, "window", "", "the calendar window its spend resets on: day, week (from Monday) or month")
	cmd.Flags().StringVar(&zone, "zone", "", "the IANA time zone of the window's boundaries, e.g. Europe/Berlin (default UTC)")
	return cmd
}

func newBudgetsRaiseCmd() *cobra.Command {
	var db, file string
	cmd := &cobra.Command{
		Use:   "raise NAME --file BUDGET.yaml",
		Short: "Change a named budget's tiers (recorded: who, when, from which file)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return badInput(errors.New("--file: a budget file (YAML or JSON) is required"))
			}
			cfg, err := config.LoadNamedBudget(file)
			if err != nil {
				return badInput(err)
			}
			abs, err := filepath.Abs(file)
			if err != nil {
				return err
			}
			a, err := openBudgets(cmd, db, false)
			if err != nil {
				return err
			}
			defer a.Close()
			s := a.Store
			old, err := s.NamedBudget(cmd.Context(), args[0])
			if errors.Is(err, purser.ErrNotFound) {
				return badInput(fmt.Errorf("no named budget %s; create it with purser budgets create", args[0]))
			}
			if err != nil {
				return err
			}
			r := purser.NamedBudgetRaise{Name: old.Name, At: time.Now(), By: app.Whoami(), Source: abs, From: old.Budget, To: cfg}
			if err := s.RaiseBudget(cmd.Context(), r); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "raised named budget %s: %s → %s per %s\n", old.Name, report.CapsText(old.Caps()), report.CapsText(purser.NamedBudget{Budget: cfg}.Caps()), old.Window)
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", app.DBFlagHelp)
	cmd.Flags().StringVar(&file, "file", "", "the new budget file (YAML or JSON)")
	return cmd
}

func newBudgetsShowCmd() *cobra.Command {
	var db string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show [NAME] [--json]",
		Short: "Show named budgets: spend in the current window, tier, runs drawing from them, raises",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			a, err := openBudgets(cmd, db, false)
			if err != nil {
				return err
			}
			defer a.Close()
			s := a.Store
			var names []string
			if len(args) == 1 {
				names = args
			} else {
				list, err := s.NamedBudgetList(ctx)
				if err != nil {
					return err
				}
				for _, b := range list {
					names = append(names, b.Name)
				}
			}
			now := time.Now()
			out := []report.NamedBudgetJSON{}
			for _, name := range names {
				st, err := s.NamedBudgetStatus(ctx, name, now)
				if errors.Is(err, purser.ErrNotFound) {
					return badInput(fmt.Errorf("no named budget %s", name))
				}
				if err != nil {
					return err
				}
				raises, err := s.BudgetRaises(ctx, name)
				if err != nil {
					return err
				}
				j := report.NamedBudgetView(st, raises)
				out = append(out, j)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			if len(out) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no named budgets; create one with purser budgets create NAME --file FILE --window month")
				return nil
			}
			for _, j := range out {
				report.WriteNamedBudget(cmd.OutOrStdout(), j)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", app.DBFlagHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
