package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/engine"
)

// queueScope is what --help says of who shares a queue.
const queueScope = `The queue is in the database: on PostgreSQL (a postgres:// URL) it serves
workers on every host that reaches the server; on a SQLite file it serves
workers on the machine that holds the file only, not across hosts (a file on
a network filesystem such as NFS or SMB is refused).`

func newSubmitCmd() *cobra.Command {
	var db, budgetsDB, runBudget, runName, drawFrom string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "submit TASKFILE... --run NAME [--run-budget FILE] [--draw-from BUDGET,...] [--db URL] [--json]",
		Short: "Queue tasks for the workers (purser worker) sharing the database",
		Long: `Queues each task for the workers that take tasks from the same database
(purser worker), in the named run, whose budget they all share.
The task files are checked first; nothing is queued if one is wrong.

` + queueScope + `

Workers find a task by its file's absolute path: every worker host must see
the task files, and their workspaces, at the same paths (a shared mount).
A task already submitted is left as it is.

--draw-from (and a task file's drawFrom:) records that the run draws from
those named budgets (purser budgets): every worker then admits each call of
the run's tasks against them, as purser run --draw-from does.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("submit needs at least one task file\n\nUsage:\n  purser %s", cmd.Use)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if !engine.ValidRunName(runName) {
				return badInput(fmt.Errorf("--run %q: want a name of letters, digits, '.', '_' or '-' (at most 128), shared by the workers", runName))
			}
			tasks, proj, err := app.LoadTasks(loadTask, args)
			if err != nil {
				return err
			}
			a, err := app.Open(cmd.Context(), app.Options{DB: db, BudgetsDB: budgetsDB, Project: proj, Create: true, Queue: cmd.Name(), Backends: backends(), LoadTask: loadTask,
				Stderr: cmd.ErrOrStderr(), Preflight: app.Preflight{Tasks: tasks, RunBudgetFile: runBudget}})
			if err != nil {
				return err
			}
			defer a.Close()
			enc := json.NewEncoder(cmd.OutOrStdout())
			return a.Submit(cmd.Context(), app.Submission{Run: runName, Draws: drawFrom, Files: args, Tasks: tasks}, func(s app.Submitted) {
				switch {
				case asJSON:
					_ = enc.Encode(struct {
						TaskID string `json:"task"`
						RunID  string `json:"run"`
						File   string `json:"file"`
						Queued bool   `json:"queued"` // false: submitted already, left as it was
					}{s.TaskID, runName, s.File, s.Queued})
				case s.Queued:
					fmt.Fprintf(cmd.OutOrStdout(), "queued %s (run %s, %s)\n", s.TaskID, runName, s.File)
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "%s was submitted already; left as it is\n", s.TaskID)
				}
			})
		},
	}
	cmd.Flags().StringVar(&db, "db", "", "the database the workers share: a postgres:// URL (workers on many hosts) or a SQLite file (workers on this machine) (default: $PURSER_DB, else purser.yaml's database:, else the project's)")
	cmd.Flags().StringVar(&budgetsDB, "budgets-db", "", app.BudgetsDBFlagHelp)
	cmd.Flags().StringVar(&runName, "run", "", "the run the tasks join; its budget is shared by every worker (required)")
	cmd.Flags().StringVar(&runBudget, "run-budget", "", "the run's budget file (YAML or JSON), for a new run")
	cmd.Flags().StringVar(&drawFrom, "draw-from", "", "named budgets (comma-separated) the run draws from: each call of its tasks must fit in every one (see purser budgets)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object a line per task ({task, run, file, queued})")
	_ = cmd.MarkFlagRequired("run")
	return cmd
}
