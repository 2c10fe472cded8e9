package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/budget"
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
from it inside the current window.

Named budgets form a tree (org month → team week → repository day): a budget
created with --parent is a part of its parent, and a run drawing from it
draws from its every ancestor too. A call is admitted only if it fits in all
of them at once (the refusal names the one that is short); each counts the
runs under it in its own window. A child's caps may be larger than what its
parent has left: the parent still binds. purser budgets tree shows it.`,
	}
	cmd.AddCommand(newBudgetsCreateCmd(), newBudgetsShowCmd(), newBudgetsRaiseCmd(), newBudgetsTreeCmd())
	cmd.PersistentFlags().StringVar(&budgetsDBFlag, "budgets-db", "", app.BudgetsDBFlagHelp)
	return cmd
}

// budgetsDBFlag is purser budgets' --budgets-db.
var budgetsDBFlag string

// openBudgets opens the named budgets' database (--budgets-db, else
// app.LocateBudgets' rule, which reads the project's database when it
// exists: --db, PURSER_DB or purser.yaml's database:); create makes a
// database named by a flag, the environment or purser.yaml where none is.
func openBudgets(cmd *cobra.Command, db string, create bool) (*app.Budgets, func() error, error) {
	return app.OpenBudgets(cmd.Context(), app.Options{DB: db, BudgetsDB: budgetsDBFlag, Create: create})
}

func newBudgetsCreateCmd() *cobra.Command {
	var db, file, window, zone, parent, usd string
	var tokens int64
	cmd := &cobra.Command{
		Use:   "create NAME (--file BUDGET.yaml | --usd N [--tokens N]) --window day|week|month [--zone ZONE] [--parent NAME]",
		Short: "Create a named budget",
		Long: `Creates a named budget: its tiers from a budget file (--file), or only a hard
cap on money and tokens (--usd, --tokens), reset on the window; with
--parent, a part of another named budget, which still binds.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			caps := usd != "" || cmd.Flags().Changed("tokens")
			if file == "" && !caps {
				return badInput(errors.New("--file: a budget file (YAML or JSON) is required (or a hard cap: --usd N, --tokens N)"))
			}
			if file != "" && caps {
				return badInput(errors.New("--file and --usd/--tokens: give the budget one way"))
			}
			w, err := purser.ParseBudgetWindow(window)
			if err != nil {
				return badInput(fmt.Errorf("--window: %w", err))
			}
			var cfg budget.Config
			if file != "" {
				if cfg, err = config.LoadNamedBudget(file); err != nil {
					return badInput(err)
				}
			} else if cfg, err = hardCaps(usd, tokens, cmd.Flags().Changed("tokens")); err != nil {
				return badInput(err)
			}
			b := purser.NamedBudget{Name: args[0], Budget: cfg, Window: w, Zone: zone, Parent: parent, CreatedAt: time.Now()}
			if err := b.Validate(); err != nil {
				return badInput(fmt.Errorf("named budget: %w", err))
			}
			a, closeDB, err := openBudgets(cmd, db, true)
			if err != nil {
				return err
			}
			defer closeDB()
			s := a.Named
			if err := s.CreateBudget(cmd.Context(), b); err != nil {
				if errors.Is(err, purser.ErrBudgetExists) {
					return badInput(fmt.Errorf("named budget %s exists; change it with purser budgets raise %s --file FILE", b.Name, b.Name))
				}
				if errors.Is(err, purser.ErrNotFound) {
					return badInput(fmt.Errorf("--parent: no named budget %s in the database %s (create it there first)", b.Parent, a.DB))
				}
				if cycle := (*purser.BudgetCycleError)(nil); errors.As(err, &cycle) {
					return badInput(cycle)
				}
				return err
			}
			under := ""
			if b.Parent != "" {
				under = ", under " + b.Parent
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created named budget %s: %s per %s%s%s\n", b.Name, report.CapsText(b.Caps()), b.Window, report.ZoneText(b.Zone), under)
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", app.DBFlagHelp)
	cmd.Flags().StringVar(&file, "file", "", "the budget file (YAML or JSON): optimal/warning/hard over usd and tokens")
	cmd.Flags().StringVar(&window, "window", "", "the calendar window its spend resets on: day, week (from Monday) or month")
	cmd.Flags().StringVar(&zone, "zone", "", "the IANA time zone of the window's boundaries, e.g. Europe/Berlin (default UTC)")
	cmd.Flags().StringVar(&parent, "parent", "", "the named budget this one is a part of: runs drawing from it draw from the parent too")
	cmd.Flags().StringVar(&usd, "usd", "", "instead of --file: the hard cap on money, in dollars")
	cmd.Flags().Int64Var(&tokens, "tokens", 0, "instead of --file: the hard cap on tokens")
	return cmd
}

// hardCaps is a named budget of hard caps alone, from --usd and --tokens.
func hardCaps(usd string, tokens int64, setTokens bool) (budget.Config, error) {
	var cfg budget.Config
	if usd != "" {
		v, err := budget.ParseUSD(strings.TrimPrefix(usd, "$"))
		if err != nil || v <= 0 {
			return cfg, fmt.Errorf("--usd %q: want a positive amount of dollars, e.g. 500", usd)
		}
		cfg.Hard.USD = &v
	}
	if setTokens {
		if tokens <= 0 {
			return cfg, fmt.Errorf("--tokens %d: want a positive number of tokens", tokens)
		}
		cfg.Hard.Tokens = &tokens
	}
	return cfg, nil
}

func newBudgetsRaiseCmd() *cobra.Command {
	var db, file, parent string
	cmd := &cobra.Command{
		Use:   "raise NAME [--file BUDGET.yaml] [--parent NAME|\"\"]",
		Short: "Change a named budget's tiers or parent (recorded: who, when, from which file)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			move := cmd.Flags().Changed("parent")
			if file == "" && !move {
				return badInput(errors.New("--file: a budget file (YAML or JSON) is required (or --parent to move the budget)"))
			}
			var cfg budget.Config
			var abs string
			if file != "" {
				var err error
				if cfg, err = config.LoadNamedBudget(file); err != nil {
					return badInput(err)
				}
				if abs, err = filepath.Abs(file); err != nil {
					return err
				}
			}
			a, closeDB, err := openBudgets(cmd, db, false)
			if err != nil {
				return err
			}
			defer closeDB()
			s := a.Named
			old, err := s.NamedBudget(cmd.Context(), args[0])
			if errors.Is(err, purser.ErrNotFound) {
				return badInput(fmt.Errorf("no named budget %s in the database %s; create it with purser budgets create", args[0], a.DB))
			}
			if err != nil {
				return err
			}
			if file != "" {
				r := purser.NamedBudgetRaise{Name: old.Name, At: time.Now(), By: app.Whoami(), Source: abs, From: old.Budget, To: cfg}
				if err := s.RaiseBudget(cmd.Context(), r); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "raised named budget %s: %s → %s per %s\n", old.Name, report.CapsText(old.Caps()), report.CapsText(purser.NamedBudget{Budget: cfg}.Caps()), old.Window)
			}
			if move {
				var cycle *purser.BudgetCycleError
				err := s.SetBudgetParent(cmd.Context(), old.Name, parent, app.Whoami(), "purser budgets raise --parent", time.Now())
				switch {
				case errors.Is(err, purser.ErrNotFound):
					return badInput(fmt.Errorf("--parent: no named budget %s in the database %s", parent, a.DB))
				case errors.As(err, &cycle):
					return badInput(cycle)
				case err != nil:
					return err
				}
				to := parent
				if to == "" {
					to = "none (a root)"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "moved named budget %s under %s\n", old.Name, to)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", app.DBFlagHelp)
	cmd.Flags().StringVar(&file, "file", "", "the new budget file (YAML or JSON)")
	cmd.Flags().StringVar(&parent, "parent", "", `move the budget under another ("" makes it a root); a loop is refused`)
	return cmd
}

func newBudgetsTreeCmd() *cobra.Command {
	var db string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tree [--json]",
		Short: "Show the named budgets as their tree: each one's window, spend, holds, room and children",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			a, closeDB, err := openBudgets(cmd, db, false)
			if err != nil {
				return err
			}
			defer closeDB()
			tree, err := report.ReadBudgetTree(ctx, a.Named, time.Now())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(tree)
			}
			if len(tree) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no named budgets in %s; create one with purser budgets create NAME --file FILE --window month\n", a.DB)
				return nil
			}
			report.WriteBudgetTree(cmd.OutOrStdout(), tree)
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", app.DBFlagHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
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
			a, closeDB, err := openBudgets(cmd, db, false)
			if err != nil {
				return err
			}
			defer closeDB()
			s := a.Named
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
					return badInput(fmt.Errorf("no named budget %s in the budgets database %s", name, a.DB))
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
