package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/redact"
	"github.com/purser-dev/purser/report"
	"github.com/purser-dev/purser/tui"
	"github.com/purser-dev/purser/workspace"
)

// acceptConfigHelp is the --accept-config flag's help.
const acceptConfigHelp = "accept a change to what governs the task (billing, database, backend command/env/models, sandbox) found in its task file or purser.yaml inside its workspace, pinned at its first start"

// exitInterrupted is the exit code of a run stopped by a signal: its tasks
// are left resumable.
const exitInterrupted = 130

// openHere opens the database of the working directory's project (or the
// one --db or PURSER_DB names): a missing database is bad input that says
// which was looked for, never a new one.
func openHere(cmd *cobra.Command, db string) (*app.App, error) {
	return openHereWith(cmd, db, "")
}

// openHereWith is openHere with the --budgets-db flag of the commands that
// reach the named budgets (resume, serve).
func openHereWith(cmd *cobra.Command, db, budgetsDB string) (*app.App, error) {
	return app.Open(cmd.Context(), app.Options{DB: db, BudgetsDB: budgetsDB, Backends: backends(), LoadTask: loadTask, Stderr: cmd.ErrOrStderr()})
}

// session is one command's engine and live view, interrupted by a signal
// (the command's context) or by the view's first Ctrl+C.
type session struct {
	ctx       context.Context
	interrupt context.CancelCauseFunc
	engine    *engine.Engine
	view      *tui.Live
	app       *app.App
	// shown is the live view the engine's events go to: view, or the one
	// of a task resumed after a raise (--wait-for-raise).
	shown   atomic.Pointer[tui.Live]
	newView func(tasks []purser.Task) *tui.Live
}

// observe passes an engine event to the live view shown.
func (s *session) observe(ev purser.Event) { s.shown.Load().Observe(ev) }

// show makes a new live view of tasks the one shown, and starts it.
func (s *session) show(tasks []purser.Task) (stop func()) {
	v := s.newView(tasks)
	s.shown.Store(v)
	return v.Start()
}

// newSession starts the alerts and the live view of the tasks, and the
// engine that runs them; proj is the tasks' project (its alerts and prices).
func newSession(cmd *cobra.Command, a *app.App, proj *config.Project, tasks []purser.Task, runBudget *budget.Config, asJSON bool) (*session, error) {
	if err := a.StartAlerts(cmd.Context(), proj, tasks); err != nil {
		return nil, err
	}
	ctx, interrupt := context.WithCancelCause(cmd.Context())
	s := &session{ctx: ctx, interrupt: interrupt, app: a}
	s.newView = func(tasks []purser.Task) *tui.Live {
		return tui.NewLive(cmd.OutOrStdout(), tui.LiveOptions{Tasks: tasks, RunBudget: runBudget,
			Interrupt: func() { interrupt(errSignal) }, Quit: quitNow, JSON: asJSON, Sandbox: app.RunSandboxLine(proj, tasks)})
	}
	s.view = s.newView(tasks)
	s.shown.Store(s.view)
	e, err := a.NewEngine(app.EngineOptions{Observe: s.observe, Prices: proj.Prices, Tasks: tasks})
	if err != nil {
		interrupt(nil)
		a.EndAlerts()
		return nil, err
	}
	s.engine = e
	return s, nil
}

// end stops the session: it delivers the alerts still queued (bounded by
// alerts.flush) and releases the context. Safe to call more than once.
func (s *session) end() {
	s.app.EndAlerts()
	s.interrupt(nil)
}

func newRunCmd() *cobra.Command {
	var db, budgetsDB, runBudget, runName, ci, drawFrom, gw string
	var parallel int
	var asJSON, acceptConfig bool
	var waitRaise time.Duration
	cmd := &cobra.Command{
		Use:   "run TASKFILE... [--db PATH] [--parallel N] [--run-budget FILE] [--run NAME] [--draw-from BUDGET,...] [--json] [--ci github] [--accept-config] [--wait-for-raise D]",
		Short: "Run tasks under their budgets",
		Long: `Runs each task iteration by iteration until its validators pass (DONE), its
budget stops it (BLOCKED) or it fails (FAILED).

Exit codes: 0 every task is DONE; 3 a task is BLOCKED by its budget; 1 a task
failed; 2 bad input (nothing was run); 130 interrupted (tasks are resumable;
tasks that had not started are left untouched).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("run needs at least one task file\n\nUsage:\n  purser %s", cmd.Use)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if parallel < 1 {
				return badInput(fmt.Errorf("--parallel: want at least 1, got %d", parallel))
			}
			if err := checkCI(ci); err != nil {
				return err
			}
			tasks, proj, err := loadRunTasks(cmd, gw, args)
			if err != nil {
				return err
			}
			// Unpriced calls are checked here unless the run is joined without
			// its budget: the engine checks against the run's stored budget
			// before each call.
			a, err := app.Open(cmd.Context(), app.Options{DB: db, BudgetsDB: budgetsDB, Project: proj, Create: true, Backends: backends(), LoadTask: loadTask, Stderr: cmd.ErrOrStderr(),
				Preflight: app.Preflight{Tasks: tasks, Files: args, Draws: true, Alerts: true, RunBudgetFile: runBudget, Unpriced: runName == "" || runBudget != "", AcceptConfig: acceptConfig}})
			if err != nil {
				return err
			}
			defer a.Close()
			if drawFrom != "" {
				if runName, err = a.DrawFrom(cmd.Context(), runName, drawFrom); err != nil {
					return err
				}
			}
			runCfg := a.RunBudget
			s, err := newSession(cmd, a, proj, tasks, a.ShownRunBudget(cmd.Context(), runName, runCfg), asJSON)
			if err != nil {
				return err
			}
			defer s.end()
			stopView := s.view.Start()
			outcomes, err := s.engine.RunBatch(s.ctx, engine.Batch{Tasks: tasks, Name: runName, Budget: runCfg, Parallel: parallel})
			stopView()
			if err == nil && waitRaise > 0 {
				outcomes = waitForRaises(s, a.RaiseWatch(cmd.Context()), notesOut(cmd, asJSON), waitRaise, outcomes)
			}
			s.end()
			if err != nil {
				return requestError(err)
			}
			return runOutcome(cmd, a.Store, ci, asJSON, tasks, outcomes)
		},
	}
	cmd.Flags().StringVar(&db, "db", "", app.DBFlagHelp)
	cmd.Flags().StringVar(&budgetsDB, "budgets-db", "", app.BudgetsDBFlagHelp)
	cmd.Flags().IntVar(&parallel, "parallel", 1, "how many tasks run at once")
	cmd.Flags().StringVar(&gw, "gateway", "", app.GatewayFlagHelp)
	cmd.Flags().StringVar(&runBudget, "run-budget", "", "a budget file (YAML or JSON) shared by all the tasks of this run")
	cmd.Flags().StringVar(&runName, "run", "", "name the run, so that other purser processes on the same database can join it and share its budget")
	cmd.Flags().StringVar(&drawFrom, "draw-from", "", "named budgets (comma-separated) this run draws from: each call must fit in every one (see purser budgets)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the events as JSON Lines (for CI and scripts) instead of the live view")
	cmd.Flags().StringVar(&ci, "ci", "", "report the run to a CI system when it ends: github (job summary in $GITHUB_STEP_SUMMARY, ::warning/::error annotations)")
	cmd.Flags().BoolVar(&acceptConfig, "accept-config", false, acceptConfigHelp)
	cmd.Flags().DurationVar(&waitRaise, "wait-for-raise", 0, "stay attached after tasks are BLOCKED by their budget, up to this long (e.g. 30m): a task raised meanwhile with purser raise is resumed here")
	return cmd
}

// notesOut is where a run's notes go: stdout, or stderr when stdout
// carries JSON.
func notesOut(cmd *cobra.Command, asJSON bool) io.Writer {
	if asJSON {
		return cmd.ErrOrStderr()
	}
	return cmd.OutOrStdout()
}

// loadRunTasks reads a run's task files, with the door's service set
// before (from --gateway or $PURSER_GATEWAY, for the backends' own checks)
// and after (purser.yaml's gateway:, known once they are read).
func loadRunTasks(cmd *cobra.Command, gw string, paths []string) ([]purser.Task, *config.Project, error) {
	if err := useGatewayFirst(gw); err != nil {
		return nil, nil, err
	}
	tasks, proj, err := app.LoadTasks(loadTask, paths)
	if err != nil {
		return nil, nil, err
	}
	return tasks, proj, useGateway(cmd, gw, proj)
}

// runOutcome reports a run's outcome, and to the CI system when ci names
// one, and picks the exit code.
func runOutcome(cmd *cobra.Command, store report.CIStore, ci string, asJSON bool, tasks []purser.Task, outcomes []engine.TaskOutcome) error {
	notes := cmd.OutOrStdout()
	if asJSON {
		notes = cmd.ErrOrStderr() // stdout holds only JSON Lines
	}
	var ciErr error
	if ci != "" {
		ids := make([]string, len(tasks))
		for i, t := range tasks {
			ids[i] = t.ID
		}
		_, ciErr = report.WriteCIReport(cmd.Context(), notes, store, ids, true)
	}
	err := outcome(notes, cmd.ErrOrStderr(), outcomes)
	if ciErr != nil {
		// The run's own outcome decides the exit code; a report that
		// could not be written fails a run that would have passed.
		fmt.Fprintf(cmd.ErrOrStderr(), "purser: --ci %s: %s\n", ci, redact.Display(ciErr.Error()))
		if err == nil {
			return &exitError{code: exitFailure, err: ciErr, reported: true}
		}
	}
	return err
}

// requestError turns a request the engine refused into bad input (exit 2).
func requestError(err error) error {
	var re *engine.RequestError
	if errors.As(err, &re) {
		return badInput(err)
	}
	return err
}

// outcome reports each task that did not end DONE and picks the exit code:
// a failure outranks an interruption, which outranks a budget stop.
func outcome(stdout, stderr io.Writer, outcomes []engine.TaskOutcome) error {
	code := exitOK
	var first error
	for _, o := range outcomes {
		// The task's own STATUS file: another task sharing the workspace
		// may have STATUS.md.
		status := filepath.Join(o.Task.Workspace, workspace.ArtifactsOf(o.Task.Workspace, o.Task.ID).Status)
		if o.Skipped {
			fmt.Fprintf(stdout, "task %s is already DONE (see %s); skipped\n", o.Task.ID, status)
			continue
		}
		if o.Err == nil {
			continue
		}
		var c int
		var claimed *purser.TaskClaimedError
		switch {
		case errors.As(o.Err, &claimed):
			c = exitBadInput
		case engine.IsBudgetStop(o.Err):
			c = exitBudgetStop
		case errors.Is(o.Err, engine.ErrInterrupted):
			c = exitInterrupted
		default:
			c = exitFailure
		}
		if claimed != nil {
			fmt.Fprintf(stderr, "purser: %s; not run here\n", claimed)
		} else if errors.Is(o.Err, engine.ErrNotStarted) {
			fmt.Fprintf(stderr, "purser: task %s not started: the run was interrupted before it began; it is left as it was\n", o.Task.ID)
		} else {
			fmt.Fprintf(stderr, "purser: task %s %s (see %s)\n", o.Task.ID, redact.Display(engine.Describe(o.Err)), status)
		}
		if rank(c) > rank(code) {
			code, first = c, o.Err
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
		return 4
	case exitBadInput:
		return 3
	case exitInterrupted:
		return 2
	case exitBudgetStop:
		return 1
	}
	return 0
}

// resumable reads a task to resume: its record, and its task file read
// anew. A task already DONE is said so, with no error and no task.
func resumable(cmd *cobra.Command, a *app.App, id string) (purser.TaskRecord, purser.Task, *config.Project, error) {
	rec, err := a.Store.Task(cmd.Context(), id)
	if errors.Is(err, purser.ErrNotFound) {
		return rec, purser.Task{}, nil, badInput(fmt.Errorf("no task %q in %s", id, a.DB))
	}
	if err != nil {
		return rec, purser.Task{}, nil, err
	}
	if rec.State == purser.StateDone {
		fmt.Fprintf(cmd.OutOrStdout(), "task %s is already DONE; nothing to resume\n", rec.ID)
		return rec, purser.Task{}, nil, nil
	}
	if rec.File == "" {
		// A purser shell session is recorded as a task with no file:
		// there is nothing to read it again from.
		return rec, purser.Task{}, nil, badInput(fmt.Errorf("task %s has no task file to resume from (a purser shell session is not resumed: start a new one with purser shell)", rec.ID))
	}
	task, proj, err := loadTask(rec.File)
	if err != nil {
		return rec, task, nil, badInput(fmt.Errorf("task %s: %w", rec.ID, err))
	}
	if task.ID != rec.ID {
		return rec, task, nil, badInput(fmt.Errorf("%s now has id %q, not %q", rec.File, task.ID, rec.ID))
	}
	return rec, task, proj, nil
}

func newResumeCmd() *cobra.Command {
	var db, budgetsDB, budgetFile, gw string
	var asJSON, acceptConfig bool
	cmd := &cobra.Command{
		Use:   "resume TASK [--db PATH] [--budget FILE] [--json] [--accept-config]",
		Short: "Run a stopped task again, after its budget was raised",
		Long: `Runs a BLOCKED (or interrupted) task again from its task file, read anew.
What the task spent carries over. Its budget changes only by an act of the
user: --budget FILE, or a task file outside the task's workspace (a task file
inside it may have been rewritten by the agent, so a budget change there is
refused). Every change is recorded with who, when and from which file. If the
budget is still exhausted, the task is refused with BudgetExhaustedError
(exit 3) and no call starts.

What else governs the task (billing, database, backend command, env and
models, sandbox, drawFrom) was pinned at its first start when its task file
or purser.yaml lies inside its workspace; a change there is refused, with
the diff (exit 2), unless you made it: --accept-config.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := openHereWith(cmd, db, budgetsDB)
			if err != nil {
				return err
			}
			defer a.Close()
			if err := useGatewayFirst(gw); err != nil {
				return err
			}
			rec, task, proj, err := resumable(cmd, a, args[0])
			if err != nil || rec.State == purser.StateDone {
				return err
			}
			if err := useGateway(cmd, gw, proj); err != nil {
				return err
			}
			if err := a.Preflight(cmd.Context(), app.Preflight{Tasks: []purser.Task{task}, Files: []string{rec.File}, Draws: true, Project: proj, AcceptConfig: acceptConfig}); err != nil {
				return err
			}
			s, err := newSession(cmd, a, proj, []purser.Task{task}, a.ShownRunBudget(cmd.Context(), rec.RunID, nil), asJSON)
			if err != nil {
				return err
			}
			defer s.end()
			stopView := s.view.Start()
			var raise *engine.BudgetRaise
			if budgetFile != "" {
				cfg, err := config.LoadBudget(budgetFile)
				if err != nil {
					return badInput(err)
				}
				abs, _ := filepath.Abs(budgetFile)
				raise = &engine.BudgetRaise{Budget: cfg, Source: abs, By: app.Whoami()}
			}
			o, err := s.engine.Resume(s.ctx, task, raise)
			stopView()
			s.end()
			if err != nil {
				return requestError(err)
			}
			if o.Skipped {
				fmt.Fprintf(cmd.OutOrStdout(), "task %s is already DONE; nothing to resume\n", o.Task.ID)
				return nil
			}
			return outcome(cmd.OutOrStdout(), cmd.ErrOrStderr(), []engine.TaskOutcome{o})
		},
	}
	cmd.Flags().StringVar(&db, "db", "", app.DBFlagHelp)
	cmd.Flags().StringVar(&budgetsDB, "budgets-db", "", app.BudgetsDBFlagHelp)
	cmd.Flags().StringVar(&gw, "gateway", "", app.GatewayFlagHelp)
	cmd.Flags().StringVar(&budgetFile, "budget", "", "a new budget for the task (a budget file outside its workspace); the change is recorded")
	cmd.Flags().BoolVar(&acceptConfig, "accept-config", false, acceptConfigHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the events as JSON Lines (for CI and scripts) instead of the live view")
	return cmd
}
