// Package app is where Purser is wired: the one place that finds the project
// and its database, opens the store, makes the checks before any money is
// spent, starts the alerts and builds the engine. The commands (cmd/purser)
// turn flags into Options and print what App returns; the worker (package
// worker) runs queued tasks through it.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/report"
	"github.com/purser-dev/purser/workspace"
)

// LoadTaskFunc reads a task file and its project, with every check that can
// be made before a cent is spent.
type LoadTaskFunc func(path string) (purser.Task, *config.Project, error)

// Options say what Open opens and checks.
type Options struct {
	// DB is the --db flag ("": PURSER_DB, else purser.yaml's database:,
	// else the project's default).
	DB string
	// BudgetsDB is the --budgets-db flag ("": LocateBudgets' rule).
	BudgetsDB string
	// Project is the project whose database is opened; nil: the working
	// directory's.
	Project *config.Project
	// Create makes a new database where there is none (commands that write).
	// Without it a missing database is bad input that says which was looked
	// for.
	Create bool
	// Queue, when set, names the queue command (submit, worker) opening the
	// database: it must have a job queue, and a SQLite file on a network
	// filesystem is refused.
	Queue string
	// Preflight is what to check before any money is spent.
	Preflight Preflight
	// Backends resolves the backends tasks name; LoadTask reads task files.
	Backends engine.BackendResolver
	LoadTask LoadTaskFunc
	// Stderr is told the warnings of the checks and of the alerts.
	Stderr io.Writer
}

// App is an open project: its database and what runs tasks on it.
type App struct {
	// Project is the project whose database is open: the first task's, or
	// the working directory's.
	Project *config.Project
	DB      Database
	Store   Store
	// Queue is Store's job queue, when Options.Queue asked for one.
	Queue JobStore
	// RunBudget is the run budget of Preflight.RunBudgetFile (nil: none).
	RunBudget *budget.Config
	Backends  engine.BackendResolver
	LoadTask  LoadTaskFunc
	// Alerts is the notifier StartAlerts started (nil: none).
	Alerts *Alerts

	stderr io.Writer
	// budgetsFlag is Options.BudgetsDB; budgets, once NamedBudgets opened it.
	budgetsFlag string
	budgets     *Budgets
	create      bool // OpenBudgets' Options.Create: make a missing budgets database
}

// Open finds the project and its database, makes the checks of
// o.Preflight that need no database, opens the store, and makes those that
// read it. Close releases what it opened.
func Open(ctx context.Context, o Options) (*App, error) {
	proj := o.Project
	if proj == nil {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		if proj, err = config.FindProject(wd); err != nil {
			return nil, BadInput(err)
		}
	}
	stderr := o.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	a := &App{Project: proj, DB: LocateDatabase(o.DB, proj), Backends: o.Backends, LoadTask: o.LoadTask, stderr: stderr, budgetsFlag: o.BudgetsDB}
	if err := refuseKeywordDSN(a.DB); err != nil {
		return nil, err
	}
	run, pin, err := o.Preflight.beforeOpen(stderr, proj, a.DB, o.Backends)
	if err != nil {
		return nil, err
	}
	a.RunBudget = run
	if o.Queue != "" {
		if err := refuseNetworkQueue(o.Queue, a.DB); err != nil {
			return nil, err
		}
	}
	s, err := OpenStore(ctx, a.DB, o.Create)
	if err != nil {
		if !o.Create && errors.Is(err, os.ErrNotExist) {
			return nil, BadInput(&NoDatabaseError{DB: a.DB, Queue: o.Queue})
		}
		return nil, err
	}
	if o.Queue != "" {
		q, ok := s.(JobStore)
		if !ok {
			s.Close()
			return nil, fmt.Errorf("%s: this database has no job queue", a.DB)
		}
		a.Queue = q
	}
	a.Store = s
	if err := o.Preflight.afterOpen(ctx, a); err != nil {
		a.Close()
		return nil, err
	}
	if err := pin(); err != nil {
		s.Close()
		return nil, err
	}
	return a, nil
}

// Close delivers the alerts still queued (bounded by alerts.flush) and
// closes the store. Safe to call more than once.
func (a *App) Close() error {
	a.EndAlerts()
	if a.Store == nil {
		return a.closeBudgets()
	}
	err := errors.Join(a.closeBudgets(), a.Store.Close())
	a.Store = nil
	return err
}

// StartAlerts starts the alerts proj's purser.yaml asks for (nil: the
// App's project's), for the tasks (see StartAlerts); the engines NewEngine
// builds afterwards send them.
func (a *App) StartAlerts(ctx context.Context, proj *config.Project, tasks []purser.Task) error {
	if proj == nil {
		proj = a.Project
	}
	al, err := StartAlerts(ctx, a.stderr, proj, a.Store, tasks)
	a.Alerts = al
	return err
}

// EndAlerts delivers the alerts still queued, bounded by alerts.flush, and
// says on stderr what could not be. Safe to call more than once.
func (a *App) EndAlerts() { a.Alerts.Close(a.stderr) }

// EngineOptions are what differs between the engines an App builds.
type EngineOptions struct {
	// Observe is told of every event (and the alerts, after it).
	Observe func(purser.Event)
	// Prices price the usage: the tasks' project's (nil: the engine's
	// default).
	Prices *pricing.Catalogue
	// Owners says which processes are gone; nil: this host's (proc.Owners).
	Owners purser.Owners
	// Context builds the agents' context; nil: a new builder.
	Context *contextbuild.Builder
	// Guard keeps Purser's own files from the agents; nil: a new one. A
	// worker shares one between the engines of its jobs.
	Guard  *workspace.Guard
	Logger *slog.Logger
	// Tasks are the tasks the engine will run: the engine's warnings of
	// their unpriced models reach Observe as CheckUnpriced says them (none
	// for a backend that bounds the call's money itself, once per model
	// otherwise), not once per task and model.
	Tasks []purser.Task
}

// NewEngine wires the engine: the store, the backends, the validators, the
// context builder and the prices.
func (a *App) NewEngine(o EngineOptions) (*engine.Engine, error) {
	cb := o.Context
	if cb == nil {
		var err error
		if cb, err = contextbuild.New(); err != nil {
			return nil, err
		}
	}
	guard := o.Guard
	if guard == nil {
		guard = workspace.NewGuard()
	}
	var owners purser.Owners = proc.Owners{}
	if o.Owners != nil {
		owners = o.Owners
	}
	observe := o.Observe
	if observe != nil && len(o.Tasks) > 0 {
		unpriced, inner := newUnpricedWarnings(a.Backends, o.Tasks), o.Observe
		observe = func(ev purser.Event) {
			if unpriced.pass(ev) {
				inner(ev)
			}
		}
	}
	if al := a.Alerts; al != nil {
		inner := observe
		observe = func(ev purser.Event) {
			if inner != nil {
				inner(ev)
			}
			al.Observe(ev)
		}
	}
	// The named budgets' database is opened here, whatever the tasks say:
	// a queued run's draws (--draw-from on submit) are recorded there.
	b, err := a.namedBudgets(context.Background(), false)
	if err != nil {
		return nil, err
	}
	var store Store = a.Store
	var shared purser.SharedRunBudget = a.Store
	if b.Apart {
		if store, err = newCopyingStore(a.Store, a.DB, b); err != nil {
			return nil, err
		}
		shared = bothHolds{SharedRunBudget: a.Store, project: a.Store, budgets: b.store}
	}
	return engine.New(engine.Config{
		Store:      store,
		Backends:   a.Backends,
		Validators: Validators(a.Project),
		Context:    cb,
		Artifacts:  report.Artifacts{Sandbox: func(t purser.Task) string { return SandboxLine(a.Project, t) }},
		Guard:      guard,
		Prices:     o.Prices,
		Observe:    observe,
		Owners:     owners,
		Shared:     shared,
		Named:      b.Named,
		Logger:     o.Logger,
		Forecasts:  newForecasters(a.Store, o.Prices, a.Project.Dir),
	})
}

// ShownRunBudget is the run budget a live view shows: the one given, else
// that of the run named, if it exists and has one.
func (a *App) ShownRunBudget(ctx context.Context, runID string, given *budget.Config) *budget.Config {
	if given != nil || runID == "" {
		return given
	}
	if run, err := a.Store.Run(ctx, runID); err == nil {
		return run.Budget
	}
	return nil
}
