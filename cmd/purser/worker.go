package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/worker"
)

func newWorkerCmd() *cobra.Command {
	var db, budgetsDB, gw string
	var concurrency int
	var lease, poll time.Duration
	var drain, asJSON bool
	cmd := &cobra.Command{
		Use:   "worker [--db URL] [--concurrency N] [--lease D] [--poll D] [--drain] [--json]",
		Short: "Take tasks from the queue (purser submit) and run them, on this host",
		Long: `Takes tasks from the queue in the database and runs them, at most
--concurrency at once, each in its run and under its run's budget, shared by
every worker on every host, and under the named budgets its run draws from
(purser submit --draw-from, drawFrom: in the task file). A job is leased: the worker renews the lease
while the task runs. A worker that dies (killed, host lost, network cut)
stops renewing; once its lease runs out another worker takes the task and
resumes it, with what it spent counted once. A worker that loses a lease
stops the task at once. On SIGINT/SIGTERM the worker stops its tasks
(resumable) and gives their jobs back to the queue.

` + queueScope + `

A worker serves an existing database only (purser submit creates it): one
started where there is none refuses, naming the database it looked for.

Workers find a task by its file's absolute path, as submitted: every worker
host must see the task files and workspaces at the same paths.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if concurrency < 1 {
				return badInput(fmt.Errorf("--concurrency: want at least 1, got %d", concurrency))
			}
			if lease < time.Second {
				return badInput(fmt.Errorf("--lease: want at least 1s, got %s", lease))
			}
			if poll <= 0 {
				return badInput(fmt.Errorf("--poll: want a positive duration, got %s", poll))
			}
			a, err := app.Open(cmd.Context(), app.Options{DB: db, BudgetsDB: budgetsDB, Queue: cmd.Name(), Backends: backends(), LoadTask: loadTask, Stderr: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			defer a.Close()
			return worker.Serve(cmd.Context(), a, worker.Options{Concurrency: concurrency, Lease: lease, Poll: poll, Drain: drain, JSON: asJSON, Out: cmd.OutOrStdout(), Gateway: gw,
				Log: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
		},
	}
	cmd.Flags().StringVar(&db, "db", "", "the database the workers share: a postgres:// URL (workers on many hosts) or a SQLite file (workers on this machine) (default: $PURSER_DB, else purser.yaml's database:, else the project's)")
	cmd.Flags().StringVar(&budgetsDB, "budgets-db", "", app.BudgetsDBFlagHelp)
	cmd.Flags().StringVar(&gw, "gateway", "", app.GatewayFlagHelp)
	cmd.Flags().IntVar(&concurrency, "concurrency", 1, "how many tasks this worker runs at once")
	cmd.Flags().DurationVar(&lease, "lease", 30*time.Second, "how long a job stays this worker's without a renewal (renewed every third of it)")
	cmd.Flags().DurationVar(&poll, "poll", 500*time.Millisecond, "how often an idle worker looks for a job")
	cmd.Flags().BoolVar(&drain, "drain", false, "exit once every job on the queue is finished (for batches and tests), or, non-zero and naming them, once only jobs refused here (their task run by another process) are left")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object a line per job settled ({task, run, attempt, outcome, reason}) instead of text")
	return cmd
}
