package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/report"
)

// ciSystems are the CI systems --ci knows.
var ciSystems = []string{"github"}

// checkCI refuses a --ci value Purser does not know.
func checkCI(ci string) error {
	if ci == "" || ci == "github" {
		return nil
	}
	return badInput(fmt.Errorf("--ci: %q is not a CI system Purser knows (known: %s)", ci, strings.Join(ciSystems, ", ")))
}

func newCISummaryCmd() *cobra.Command {
	var db, ci string
	cmd := &cobra.Command{
		Use:   "ci-summary [TASK...] [--ci github] [--db PATH]",
		Short: "Report tasks to a CI system: job summary, annotations, and a failing check when a task is BLOCKED",
		Long: `Reports the tasks named (every task of the database when none is) to a CI
system. For GitHub Actions (--ci github, the default): the table of tasks is
appended to $GITHUB_STEP_SUMMARY as Markdown (printed when that is not set),
and a ::warning annotation is printed for each task that ended in WARNING, an
::error for each BLOCKED or FAILED one.

Exit codes: 0 no task is BLOCKED or FAILED; 3 a task is BLOCKED by its
budget; 1 a task FAILED; 2 bad input.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCI(ci); err != nil {
				return err
			}
			a, err := openHere(cmd, db)
			if err != nil {
				return err
			}
			defer a.Close()
			store := a.Store
			tasks, err := report.WriteCIReport(cmd.Context(), cmd.OutOrStdout(), store, args, false)
			var missing *report.NoTaskError
			if errors.As(err, &missing) {
				return badInput(fmt.Errorf("%w %s", err, a.DB))
			}
			if err != nil {
				return err
			}
			code := exitOK
			for _, t := range tasks {
				switch t.Record.State {
				case purser.StateFailed:
					code = exitFailure
				case purser.StateBlocked:
					if code == exitOK {
						code = exitBudgetStop
					}
				}
			}
			if code != exitOK {
				return &exitError{code: code, err: errors.New("a task did not end DONE"), reported: true}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", app.DBFlagHelp)
	cmd.Flags().StringVar(&ci, "ci", "github", "the CI system: github")
	return cmd
}
