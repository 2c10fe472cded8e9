// Package engine runs tasks iteration by iteration under their budget: it
// degrades in WARNING, stops dead at HARD, and records every call and every
// token in the store. It sees only interfaces: no concrete backend or store.
package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/workspace"
)

// BackendResolver returns the backend a task names.
type BackendResolver func(purser.BackendSpec) (purser.Backend, error)

// RetryPolicy bounds the engine's retries of transient backend errors. Each
// retry is its own recorded call and passes the budget check first.
type RetryPolicy struct {
	Max  int           // retries after the first attempt
	Base time.Duration // first backoff; doubles each retry
}

// DefaultRetry retries twice, after 1s and 2s.
var DefaultRetry = RetryPolicy{Max: 2, Base: time.Second}

// DefaultReserveOutputTokens is the output a call is assumed to produce at
// most, for admission, when the backend cannot cap it more precisely.
const DefaultReserveOutputTokens = 8192

// DefaultHeartbeat is how often a running task's wall time is made durable.
const DefaultHeartbeat = 2 * time.Second

// DefaultRunRefresh is how often a run's spend is read back from the store
// while its tasks run, when the store does not tell of changes as they
// happen (SQLite). It bounds how long a HARD reached by another process
// takes to stop this process's calls.
const DefaultRunRefresh = 500 * time.Millisecond

// Config configures an Engine. Store, Backends, Validators, Context and
// Artifacts are required; every other field has a default (see
// WithDefaults).
type Config struct {
	Store      purser.Store
	Backends   BackendResolver
	Validators purser.ValidatorRunner
	Context    *contextbuild.Builder
	// Artifacts renders the STATUS.md and BUDGET.md the engine writes at a
	// task's workspace root when it stops (report.Artifacts). It has no
	// default: the engine does not know the renderers.
	Artifacts purser.ArtifactRenderer
	// Prices estimates what backends do not report; default: pricing.New().
	Prices *pricing.Catalogue
	Clock  budget.Clock // default: budget.SystemClock
	Logger *slog.Logger // default: discards
	// Retry bounds retries of transient errors; the zero value means
	// DefaultRetry. Max < 0 disables retries.
	Retry RetryPolicy
	// ReserveOutputTokens is the worst-case output reserved per call;
	// default: DefaultReserveOutputTokens.
	ReserveOutputTokens int64
	// Observe, when set, is told of every event. It is called from the
	// goroutines running tasks, possibly at once, and must not block.
	Observe func(purser.Event)
	// Owners identifies this process in the task records, and tells whether
	// the owner of a RUNNING task is still alive. Default: every task is
	// taken as owned by nobody (no process check).
	Owners purser.Owners
	// Heartbeat is how often a running task's (and run's) wall time is
	// saved; default: DefaultHeartbeat.
	Heartbeat time.Duration
	// StallTimeout is the stall window of a backend that sets none
	// (BackendSpec.StallTimeout): a call from which nothing comes for this
	// long is ended as stalled and retried. Default: DefaultStallTimeout;
	// negative: no stall detection.
	StallTimeout time.Duration
	// Shared, when set, admits each call against the run budget through the
	// database too, so that processes sharing a run never jointly overrun it.
	Shared purser.SharedRunBudget
	// Named, when set, admits each call of a run against every named
	// budget the run draws from (Named.RunDraws), through the database, so
	// that runs drawing from one budget never jointly overrun it.
	Named purser.NamedBudgets
	// Guard is the set of files no agent may write (workspace.Guard): New
	// adds the Store's own files to it, and each task's backend's when it
	// is resolved. A process running several engines gives them one guard,
	// so that no task's agent writes what another engine keeps. Default: a
	// guard of this engine's own.
	Guard *workspace.Guard
	// RunRefresh is how often a run's spend across every process is read
	// back from the store while its tasks run; default: DefaultRunRefresh.
	// A store that is a purser.RunUsageWatcher is also read on each change
	// it tells of.
	RunRefresh time.Duration
	// Forecasts, when set, gives each task its spend forecaster: the
	// forecast is updated after every call, shown (EventForecast,
	// STATUS.md) and read by warning.forecast (engine/forecast.go).
	Forecasts ForecastResolver
}

// WithDefaults returns a copy of c with every unset optional field set to its
// default. c itself is not changed, so one Config can serve many engines.
func (c Config) WithDefaults() Config {
	if c.Prices == nil {
		c.Prices = pricing.New()
	}
	if c.Clock == nil {
		c.Clock = budget.SystemClock
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Retry == (RetryPolicy{}) {
		c.Retry = DefaultRetry
	}
	if c.Retry.Max < 0 {
		c.Retry.Max = 0
	}
	if c.ReserveOutputTokens <= 0 {
		c.ReserveOutputTokens = DefaultReserveOutputTokens
	}
	if c.Owners == nil {
		c.Owners = nobody{}
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = purser.DefaultStallTimeout
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.RunRefresh <= 0 {
		c.RunRefresh = DefaultRunRefresh
	}
	if c.Guard == nil {
		c.Guard = workspace.NewGuard()
	}
	return c
}

// validate says which required field is missing.
func (c Config) validate() error {
	var missing []string
	if c.Store == nil {
		missing = append(missing, "Store")
	}
	if c.Backends == nil {
		missing = append(missing, "Backends")
	}
	if c.Validators == nil {
		missing = append(missing, "Validators")
	}
	if c.Context == nil {
		missing = append(missing, "Context")
	}
	if c.Artifacts == nil {
		missing = append(missing, "Artifacts")
	}
	if len(missing) > 0 {
		return fmt.Errorf("engine config: %s required", strings.Join(missing, ", "))
	}
	if c.Retry.Base < 0 {
		return fmt.Errorf("engine config: Retry.Base must not be negative, got %s", c.Retry.Base)
	}
	return nil
}

// nobody is the default Owners: no process identity, no process check.
type nobody struct{}

func (nobody) Self() string     { return "" }
func (nobody) Gone(string) bool { return true }

// Engine runs tasks. It is safe for concurrent use: many tasks may run on
// one Engine at once; its configuration never changes after New.
type Engine struct {
	cfg   Config
	owner string
	// warned holds the task and model pairs already warned of as unpriced,
	// so each is said once, not before every call.
	warned sync.Map
	// watcher tells of ledger changes in other processes (nil: poll only).
	watcher purser.RunUsageWatcher
	// runs are the shared runs this engine's tasks are running in.
	runs *runSyncs
	// holds drops the holds a dead owner of a resumed task left (nil: the
	// store cannot; they lapse after their TTL).
	holds purser.HoldDropper
	// reaper finds the holds gone holders left, for a call waiting for
	// room (nil: the store cannot; they lapse after their TTL).
	reaper purser.HoldReaper
}

// New returns an Engine configured by cfg, with defaults filled in. It
// refuses a configuration missing a required field.
func New(cfg Config) (*Engine, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, owner: cfg.Owners.Self(), runs: newRunSyncs()}
	// No agent's edit protocol may write or delete the ledger, wherever it
	// is.
	cfg.Guard.ProtectFilesOf(cfg.Store)
	e.watcher, _ = cfg.Store.(purser.RunUsageWatcher)
	for _, s := range []any{cfg.Shared, cfg.Named} {
		if d, ok := s.(purser.HoldDropper); ok && e.holds == nil {
			e.holds = d
		}
		if r, ok := s.(purser.HoldReaper); ok && e.reaper == nil {
			e.reaper = r
		}
	}
	// Every ledger append and every shared admission passes the run sync,
	// so that a run is judged on the spend of every process sharing it.
	e.cfg.Store = &ledgerTap{Store: cfg.Store, runs: e.runs}
	if cfg.Shared != nil {
		e.cfg.Shared = &admitTap{SharedRunBudget: cfg.Shared, runs: e.runs}
	}
	if cfg.Named != nil {
		e.cfg.Named = &namedTap{NamedBudgets: cfg.Named, runs: e.runs}
	}
	return e, nil
}

// StopError is returned by RunTask when a task did not finish DONE. Its
// cause is a *budget.BudgetExhaustedError or *budget.InsufficientBudgetError
// for a stop by budget (the task is BLOCKED), or the failure otherwise.
type StopError struct {
	TaskID string
	State  purser.TaskState
	Err    error
}

func (e *StopError) Error() string { return fmt.Sprintf("task %s %s: %v", e.TaskID, e.State, e.Err) }
func (e *StopError) Unwrap() error { return e.Err }

// IsBudgetStop reports whether err is a stop by budget.
func IsBudgetStop(err error) bool {
	var be *budget.BudgetExhaustedError
	return errors.As(err, &be) || errors.Is(err, budget.ErrInsufficientBudget)
}

// ErrInterrupted is the cause of a task stopped by its context (a signal);
// the task is left resumable.
var ErrInterrupted = errors.New("interrupted")

// errCallTimeout is the cause of a call cancelled by its backend's timeout.
var errCallTimeout = errors.New("call timeout")

// Describe is a one-line summary of a stop for logs.
func Describe(err error) string {
	var se *StopError
	if errors.As(err, &se) {
		return strings.ToLower(string(se.State)) + ": " + se.Err.Error()
	}
	return err.Error()
}

// emit tells the observer of an event, with the task's and run's status.
func (e *Engine) emit(t *taskRun, ev purser.Event) {
	if e.cfg.Observe == nil {
		return
	}
	ev.TaskID = t.task.ID
	if ev.Iteration == 0 {
		ev.Iteration = t.iteration
	}
	if t.budget != nil {
		ev.Status = t.budget.Status()
		if p := t.budget.Parent(); p != nil {
			st := p.Status()
			ev.Run = &st
		}
	}
	e.cfg.Observe(ev)
}

// Owner is this engine's owner ID in task records.
func (e *Engine) Owner() string { return e.owner }
