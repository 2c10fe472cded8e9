package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/engine"
)

// jobStore is a store workers take tasks from: on PostgreSQL, workers on
// many hosts; on a SQLite file, workers on the machine that holds it.
type jobStore interface {
	store
	purser.JobQueue
}

// openJobStore opens the database for the queue's commands. A SQLite file
// serves workers on this machine only: one on a network filesystem, where
// hosts would share it with neither a lock SQLite can trust nor one clock
// for the leases, is refused.
func openJobStore(cmd *cobra.Command, where database) (jobStore, error) {
	if isDatabaseFile(where.Path) {
		if fs, remote := networkFilesystem(where.Path); remote {
			return nil, badInput(fmt.Errorf("%s: %s is on a network filesystem (%s); a SQLite queue serves workers on the machine that holds the file, not across hosts. Keep the file on a local disk, or share a PostgreSQL database (a postgres:// URL in --db, PURSER_DB or database: in purser.yaml) between hosts", cmd.Name(), where, fs))
		}
	}
	s, err := openStore(cmd.Context(), where, true)
	if err != nil {
		return nil, err
	}
	q, ok := s.(jobStore)
	if !ok {
		s.Close()
		return nil, fmt.Errorf("%s: this database has no job queue", where)
	}
	return q, nil
}

// queueScope is what --help says of who shares a queue.
const queueScope = `The queue is in the database: on PostgreSQL (a postgres:// URL) it serves
workers on every host that reaches the server; on a SQLite file it serves
workers on the machine that holds the file only, not across hosts (a file on
a network filesystem such as NFS or SMB is refused).`

func newSubmitCmd() *cobra.Command {
	var db, runBudget, runName, drawFrom string
	cmd := &cobra.Command{
		Use:   "submit TASKFILE... --run NAME [--run-budget FILE] [--draw-from BUDGET,...] [--db URL]",
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
			tasks, proj, err := loadTasks(args)
			if err != nil {
				return err
			}
			var runCfg *budget.Config
			if runBudget != "" {
				cfg, err := config.LoadBudget(runBudget)
				if err != nil {
					return badInput(err)
				}
				runCfg = &cfg
			}
			where := locateDatabase(db, proj)
			if err := refuseDatabaseInWorkspace(where, tasks); err != nil {
				return err
			}
			q, err := openJobStore(cmd, where)
			if err != nil {
				return err
			}
			defer q.Close()
			ctx := cmd.Context()
			draws, err := submitDraws(ctx, q, drawFrom, args, tasks)
			if err != nil {
				return err
			}
			run, err := q.JoinRun(ctx, purser.Run{ID: runName, Budget: runCfg})
			if err != nil {
				return err
			}
			if runCfg != nil && !engine.SameBudget(run.Budget, runCfg) {
				return badInput(fmt.Errorf("run %s already has another budget; submit to it without --run-budget to share its budget, or name a new run", runName))
			}
			// Before any job is queued: a worker may take one at once.
			if len(draws) > 0 {
				if err := q.DrawFrom(ctx, runName, draws); err != nil {
					return err
				}
			}
			for i, t := range tasks {
				file, err := filepath.Abs(args[i])
				if err != nil {
					return err
				}
				if _, err := q.Task(ctx, t.ID); errors.Is(err, purser.ErrNotFound) {
					// Shown by purser status from now on, PENDING until a worker takes it.
					if err := q.SaveTask(ctx, purser.TaskRecord{ID: t.ID, RunID: runName, Goal: t.Goal, Workspace: t.Workspace, File: file,
						Budget: t.Budget, State: purser.StatePending}); err != nil {
						return err
					}
				} else if err != nil {
					return err
				}
				queued, err := q.SubmitJob(ctx, purser.Job{TaskID: t.ID, RunID: runName, TaskFile: file})
				if err != nil {
					return err
				}
				if queued {
					fmt.Fprintf(cmd.OutOrStdout(), "queued %s (run %s, %s)\n", t.ID, runName, file)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "%s was submitted already; left as it is\n", t.ID)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", "the database the workers share: a postgres:// URL (workers on many hosts) or a SQLite file (workers on this machine) (default: $PURSER_DB, else purser.yaml's database:, else the project's)")
	cmd.Flags().StringVar(&runName, "run", "", "the run the tasks join; its budget is shared by every worker (required)")
	cmd.Flags().StringVar(&runBudget, "run-budget", "", "the run's budget file (YAML or JSON), for a new run")
	cmd.Flags().StringVar(&drawFrom, "draw-from", "", "named budgets (comma-separated) the run draws from: each call of its tasks must fit in every one (see purser budgets)")
	_ = cmd.MarkFlagRequired("run")
	return cmd
}

// submitDraws is the named budgets the submitted run draws from: those of
// --draw-from (comma-separated) and of the task files' drawFrom:, each
// checked to exist, so that a name the database does not know is bad input
// naming it and where it came from (submit checks before it queues
// anything).
func submitDraws(ctx context.Context, s store, flag string, files []string, tasks []purser.Task) ([]string, error) {
	type draw struct{ name, from string }
	var draws []draw
	if flag != "" {
		names := splitNames(flag)
		if len(names) == 0 {
			return nil, badInput(fmt.Errorf("--draw-from %q: want named budgets, comma-separated", flag))
		}
		for _, n := range names {
			if err := purser.ValidateBudgetName(n); err != nil {
				return nil, badInput(fmt.Errorf("--draw-from: %w", err))
			}
			draws = append(draws, draw{n, "--draw-from"})
		}
	}
	for i, t := range tasks {
		for _, n := range t.DrawFrom {
			draws = append(draws, draw{n, files[i] + " (drawFrom:)"})
		}
	}
	var names []string
	for _, d := range draws {
		if slices.Contains(names, d.name) {
			continue
		}
		if _, err := s.NamedBudget(ctx, d.name); errors.Is(err, purser.ErrNotFound) {
			return nil, badInput(fmt.Errorf("%s: no named budget %q (create it with purser budgets create %s --file FILE --window month)", d.from, d.name, d.name))
		} else if err != nil {
			return nil, err
		}
		names = append(names, d.name)
	}
	slices.Sort(names)
	return names, nil
}
