package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/redact"
	"github.com/purser-dev/purser/sqlite"
	"github.com/purser-dev/purser/validate"
)

// exitInterrupted is the exit code of a run stopped by a signal: its tasks
// are left resumable.
const exitInterrupted = 130

// dbPath picks the database: --db, then PURSER_DB, then the project's.
func dbPath(flag string, proj *config.Project) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv("PURSER_DB"); env != "" {
		return env
	}
	return proj.Database
}

// projectHere finds the project from the working directory, for commands
// that are not given a task file.
func projectHere() (*config.Project, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	return config.FindProject(wd)
}

// openStoreHere opens the database of the working directory's project (or
// the one --db or PURSER_DB names) and returns it with its path.
func openStoreHere(ctx context.Context, dbFlag string) (*sqlite.Store, string, error) {
	proj, err := projectHere()
	if err != nil {
		return nil, "", err
	}
	path := dbPath(dbFlag, proj)
	store, err := sqlite.Open(ctx, path)
	return store, path, err
}

func newEngine(store purser.Store, prices *pricing.Catalogue, view *liveView) (*engine.Engine, error) {
	cb, err := contextbuild.New()
	if err != nil {
		return nil, err
	}
	e := &engine.Engine{
		Store:      store,
		Backends:   backends(),
		Validators: validate.Runner{},
		Context:    cb,
		Prices:     prices,
		Retry:      engine.DefaultRetry,
		Logger:     slog.New(slog.DiscardHandler),
		Observe:    view.observe,
		Owner:      ownerID(),
	}
	if shared, ok := store.(purser.SharedRunBudget); ok {
		e.Shared = shared
	}
	if d := os.Getenv("PURSER_RETRY_BASE"); d != "" {
		if base, err := time.ParseDuration(d); err == nil {
			e.Retry.Base = base
		}
	}
	return e, nil
}

var validRunName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

func newRunCmd() *cobra.Command {
	var db, runBudget, runName string
	var parallel int
	cmd := &cobra.Command{
		Use:   "run TASKFILE... [--db PATH] [--parallel N] [--run-budget FILE]",
		Short: "Run tasks under their budgets",
		Long: `Runs each task iteration by iteration until its validators pass (DONE), its
budget stops it (BLOCKED) or it fails (FAILED).

Exit codes: 0 every task is DONE; 3 a task is BLOCKED by its budget; 1 a task
failed; 2 bad input (nothing was run); 130 interrupted (tasks are resumable).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if parallel < 1 {
				return badInput(fmt.Errorf("--parallel: want at least 1, got %d", parallel))
			}
			var tasks []purser.Task
			var proj *config.Project
			ids := map[string]string{}
			for _, path := range args {
				t, p, err := loadTask(path)
				if err != nil {
					return badInput(err)
				}
				if other, ok := ids[t.ID]; ok {
					return badInput(fmt.Errorf("%s: task id %q is also the id of %s", path, t.ID, other))
				}
				ids[t.ID] = path
				if proj == nil {
					proj = p
				}
				tasks = append(tasks, t)
			}
			var runCfg *budget.Config
			if runBudget != "" {
				cfg, err := config.LoadBudget(runBudget)
				if err != nil {
					return badInput(err)
				}
				runCfg = &cfg
			}
			store, err := sqlite.Open(cmd.Context(), dbPath(db, proj))
			if err != nil {
				return err
			}
			defer store.Close()
			// A task already DONE is not run again (give it a new id to).
			pending := tasks[:0:0]
			for _, t := range tasks {
				if rec, err := store.Task(cmd.Context(), t.ID); err == nil && rec.State == purser.StateDone {
					fmt.Fprintf(cmd.OutOrStdout(), "task %s is already DONE (see %s); skipped\n", t.ID, filepath.Join(t.Workspace, "STATUS.md"))
					continue
				} else if err == nil && runningElsewhere(rec) {
					return badInput(fmt.Errorf("task %s is RUNNING in another process (%s)", t.ID, rec.Owner))
				}
				pending = append(pending, t)
			}
			tasks = pending
			if len(tasks) == 0 {
				return nil
			}
			run := purser.Run{ID: newRunID(), Budget: runCfg}
			if runName != "" {
				// A named run is shared: other processes may join it.
				if !validRunName.MatchString(runName) {
					return badInput(fmt.Errorf("--run %q: want letters, digits, '.', '_' or '-'", runName))
				}
				run.ID = runName
				if existing, err := store.Run(cmd.Context(), runName); err == nil && runCfg == nil {
					run.Budget = existing.Budget
				}
			}
			if err := store.SaveRun(cmd.Context(), run); err != nil {
				return err
			}
			runMgr, err := runBudgetManager(cmd.Context(), store, run)
			if err != nil {
				return err
			}
			return runTasks(cmd, store, proj.Prices, run.ID, runMgr, tasks, parallel)
		},
	}
	cmd.Flags().StringVar(&db, "db", "", "database path (default: $PURSER_DB, else .purser/purser.db beside purser.yaml)")
	cmd.Flags().IntVar(&parallel, "parallel", 1, "how many tasks run at once")
	cmd.Flags().StringVar(&runBudget, "run-budget", "", "a budget file (YAML or JSON) shared by all the tasks of this run")
	cmd.Flags().StringVar(&runName, "run", "", "name the run, so that other purser processes on the same database can join it and share its budget")
	return cmd
}

// runTasks runs tasks, at most parallel at once, and turns their outcomes
// into one error carrying the exit code.
func runTasks(cmd *cobra.Command, store purser.Store, prices *pricing.Catalogue, runID string, runMgr *budget.Manager, tasks []purser.Task, parallel int) error {
	ctx, interrupt := context.WithCancelCause(cmd.Context())
	defer interrupt(nil)
	var runCfg *budget.Config
	if runMgr != nil {
		cfg := runMgr.Config()
		runCfg = &cfg
	}
	view := newLiveView(cmd.OutOrStdout(), tasks, runCfg, func() { interrupt(errSignal) })
	e, err := newEngine(store, prices, view)
	if err != nil {
		return err
	}
	stopView := view.start()
	errs := make([]error, len(tasks))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, t := range tasks {
		if ctx.Err() != nil {
			errs[i] = fmt.Errorf("task %s not started: %w", t.ID, engine.ErrInterrupted)
			continue
		}
		sem <- struct{}{} // taken here, so tasks start in the order given
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = e.RunTask(ctx, t, runMgr, runID)
		}()
	}
	wg.Wait()
	stopView()
	return outcome(cmd.ErrOrStderr(), tasks, errs)
}

// outcome reports each stopped task and picks the exit code: a failure
// outranks an interruption, which outranks a budget stop.
func outcome(stderr io.Writer, tasks []purser.Task, errs []error) error {
	code := exitOK
	var first error
	for i, err := range errs {
		if err == nil {
			continue
		}
		var c int
		switch {
		case engine.IsBudgetStop(err):
			c = exitBudgetStop
		case errors.Is(err, engine.ErrInterrupted):
			c = exitInterrupted
		default:
			c = exitFailure
		}
		fmt.Fprintf(stderr, "purser: task %s %s (see %s)\n", tasks[i].ID, redact.String(engine.Describe(err)), filepath.Join(tasks[i].Workspace, "STATUS.md"))
		if rank(c) > rank(code) {
			code, first = c, err
		}
	}
	if code == exitOK {
		return nil
	}
	return &exitError{code: code, err: first, reported: true}
}

func rank(code int) int {
	switch code {
	case exitFailure:
		return 3
	case exitInterrupted:
		return 2
	case exitBudgetStop:
		return 1
	}
	return 0
}

func newResumeCmd() *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "resume TASK [--db PATH]",
		Short: "Run a stopped task again, after its budget was raised in its file",
		Long: `Runs a BLOCKED (or interrupted) task again from its task file, which is read
anew, so a raised budget takes effect. What the task spent carries over. If
its budget is still exhausted, it is refused with BudgetExhaustedError (exit 3)
and no call starts.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, path, err := openStoreHere(cmd.Context(), db)
			if err != nil {
				return err
			}
			defer store.Close()
			rec, err := store.Task(cmd.Context(), args[0])
			if errors.Is(err, purser.ErrNotFound) {
				return badInput(fmt.Errorf("no task %q in %s", args[0], path))
			}
			if err != nil {
				return err
			}
			if rec.State == purser.StateDone {
				fmt.Fprintf(cmd.OutOrStdout(), "task %s is already DONE; nothing to resume\n", rec.ID)
				return nil
			}
			if runningElsewhere(rec) {
				return badInput(fmt.Errorf("task %s is RUNNING in another process (%s); nothing to resume", rec.ID, rec.Owner))
			}
			task, tproj, err := loadTask(rec.File)
			if err != nil {
				return badInput(fmt.Errorf("task %s: %w", rec.ID, err))
			}
			if task.ID != rec.ID {
				return badInput(fmt.Errorf("%s now has id %q, not %q", rec.File, task.ID, rec.ID))
			}
			runMgr, err := resumeRunBudget(cmd.Context(), store, rec.RunID)
			if err != nil {
				return err
			}
			return runTasks(cmd, store, tproj.Prices, rec.RunID, runMgr, []purser.Task{task}, 1)
		},
	}
	cmd.Flags().StringVar(&db, "db", "", "database path (default: $PURSER_DB, else .purser/purser.db beside purser.yaml)")
	return cmd
}

// resumeRunBudget restores the budget of the run a task belongs to, so a
// resumed task still shares it.
func resumeRunBudget(ctx context.Context, store purser.Store, runID string) (*budget.Manager, error) {
	if runID == "" {
		return nil, nil
	}
	run, err := store.Run(ctx, runID)
	if errors.Is(err, purser.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return runBudgetManager(ctx, store, run)
}

// runBudgetManager is the run's budget with what all its tasks have spent already,
// its clock running; nil when the run has no budget.
func runBudgetManager(ctx context.Context, store purser.Store, run purser.Run) (*budget.Manager, error) {
	if run.Budget == nil {
		return nil, nil
	}
	spent, err := store.RunUsageTotals(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	m, err := budget.NewManager(*run.Budget, budget.Options{Scope: budget.ScopeRun, Initial: spent})
	if err != nil {
		return nil, badInput(err)
	}
	m.StartClock()
	return m, nil
}

// runningElsewhere reports whether a live process is running the task.
func runningElsewhere(rec purser.TaskRecord) bool {
	return rec.State == purser.StateRunning && rec.Owner != "" && !ownerGone(rec.Owner)
}
