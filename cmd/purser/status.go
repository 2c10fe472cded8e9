package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/report"
	"github.com/purser-dev/purser/tui"
)

func newStatusCmd() *cobra.Command {
	var db string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [TASK] [--db PATH] [--json]",
		Short: "Show tasks, their state and their budget",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := openHere(cmd, db)
			var none *app.NoDatabaseError
			if asJSON && len(args) == 0 && errors.As(err, &none) {
				// No database is no tasks: the empty list, as kubectl-style
				// tools print, so a script reads it like any other; the
				// note for a human goes to stderr. The text keeps refusing
				// (exit 2): a person in the wrong folder is told so.
				fmt.Fprintln(cmd.ErrOrStderr(), "purser:", err)
				return report.WriteStatusJSON(cmd.OutOrStdout(), app.ShownDatabase(none.DB.Path), nil, nil)
			}
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
			tasks, err := report.TaskStatuses(cmd.Context(), store, recs, proc.Owners{}.Gone)
			if err != nil {
				return err
			}
			// A task's tier is its own: the line of its run says whether the
			// run's budget stopped it.
			runs, err := report.RunStatuses(cmd.Context(), store, tasks)
			if err != nil {
				return err
			}
			if asJSON {
				a.TaskForecasts(cmd.Context(), recs, tasks) // reads the history: only where it is shown
				return report.WriteStatusJSON(cmd.OutOrStdout(), app.ShownDatabase(where.Path), tasks, runs)
			}
			return report.WriteStatusText(cmd.OutOrStdout(), where.String(), tasks, runs, tui.Summary)
		},
	}
	cmd.Flags().StringVar(&db, "db", "", app.DBFlagHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {\"database\": PATH, \"tasks\": [...], \"runs\": [...]} as JSON (runs: those of the tasks that have a budget)")
	return cmd
}
