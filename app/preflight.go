package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/workspace"
)

// Preflight is what is checked before any money is spent, the checks every
// command that runs tasks (run, resume, submit, worker) asks for. Those that
// need no database are made before it is opened; the others once it is.
type Preflight struct {
	// Tasks are refused when their workspace holds the database: an agent
	// working there could rewrite the ledger that enforces its budget.
	Tasks []purser.Task
	// Files are the tasks' files, in order: where a drawFrom: came from.
	Files []string
	// Alerts: purser.yaml's alerts must be deliverable (a webhook whose URL
	// variable is unset is bad input).
	Alerts bool
	// Unpriced: a call only a money cap would bound, on a model with no
	// price, is refused; one merely unpriced is warned of.
	Unpriced bool
	// RunBudgetFile is the run's budget file (--run-budget), loaded and
	// checked after the alerts and before the prices ("": none). Open
	// keeps it in App.RunBudget.
	RunBudgetFile string
	// Draws: the tasks' drawFrom: must name budgets the database knows
	// (checked once it is open).
	Draws bool
	// Project is the tasks' project, whose purser.yaml governs them with
	// their task files (CheckPins); nil: the App's.
	Project *config.Project
	// AcceptConfig accepts a change to what governs the tasks found in a
	// file inside their workspace (--accept-config): the user's act.
	AcceptConfig bool
}

// beforeOpen makes the checks that need no database, in the order the
// commands have always made them, and returns the run budget loaded.
func (p Preflight) beforeOpen(stderr io.Writer, proj *config.Project, db Database, backends engine.BackendResolver) (*budget.Config, func() error, error) {
	pinProj := p.Project
	if pinProj == nil {
		pinProj = proj
	}
	pin, err := CheckPins(stderr, pinProj, p.Tasks, p.AcceptConfig)
	if err != nil {
		return nil, nil, err
	}
	if p.Alerts && proj != nil {
		// A webhook whose URL variable is unset is bad input, found
		// before the database is opened or anything runs.
		if _, err := proj.Alerts.Config(); err != nil {
			return nil, nil, BadInput(err)
		}
	}
	var run *budget.Config
	if p.RunBudgetFile != "" {
		cfg, err := config.LoadBudget(p.RunBudgetFile)
		if err != nil {
			return nil, nil, BadInput(err)
		}
		run = &cfg
	}
	if p.Unpriced {
		if err := CheckUnpriced(stderr, backends, p.Tasks, run, proj.Prices); err != nil {
			return nil, nil, BadInput(err)
		}
	}
	if err := RefuseDatabaseInWorkspace(db, p.Tasks); err != nil {
		return nil, nil, err
	}
	// Last: where no box can be made, what else is wrong is said first.
	return run, pin, RefuseUnboxed(pinProj, p.Tasks)
}

// afterOpen makes the checks that read the database.
func (p Preflight) afterOpen(ctx context.Context, a *App) error {
	if !p.Draws || !drawsAny(p.Tasks) {
		return nil
	}
	b, err := a.NamedBudgets(ctx)
	if err != nil {
		return err
	}
	_, err = Draws(ctx, b.Named, b.DB, "", p.Files, p.Tasks)
	return err
}

// drawsAny says whether a task draws from a named budget (drawFrom:).
func drawsAny(tasks []purser.Task) bool {
	return slices.ContainsFunc(tasks, func(t purser.Task) bool { return len(t.DrawFrom) > 0 })
}

// Preflight makes the checks before spending on an open App: those of Open
// and those that read the database.
func (a *App) Preflight(ctx context.Context, p Preflight) error {
	_, pin, err := p.beforeOpen(a.stderr, a.Project, a.DB, a.Backends)
	if err != nil {
		return err
	}
	if err := p.afterOpen(ctx, a); err != nil {
		return err
	}
	return pin()
}

// RefuseDatabaseInWorkspace refuses tasks whose workspace holds the
// database: an agent working there could read or rewrite the ledger that
// enforces its budget.
func RefuseDatabaseInWorkspace(db Database, tasks []purser.Task) error {
	for _, t := range tasks {
		if db.IsFile() && workspace.Contains(t.Workspace, db.Path) {
			return BadInput(fmt.Errorf("task %s: its workspace %s holds the database in use, %s; an agent working there could rewrite the ledger that enforces its budget. Keep the database outside every workspace (--db, PURSER_DB or database: in purser.yaml)", t.ID, t.Workspace, db))
		}
	}
	return nil
}

// callModels are the models a task may call: its starting tier's, and the
// cheap tier's when switch_tier_cheap may move it there.
func callModels(t purser.Task) []string {
	start, _ := t.Backend.Model(t.ModelTier)
	models := []string{start}
	if cheap, ok := t.Backend.Model(purser.CheapTier); ok && cheap != start {
		for _, s := range t.Degrade.Steps {
			if s.Action == purser.SwitchTierCheap {
				models = append(models, cheap)
				break
			}
		}
	}
	return models
}

// CheckUnpriced warns on w, before anything is spent, of each model the
// tasks may call that has no price, once per backend and model however many
// tasks call it, and returns the refusals: the calls the engine would refuse
// because only a money cap would bound them (run is the run's budget, or
// nil). A backend that reports each dollar as it streams, at its billed
// price (purser.USDReporter), is no risk to the cap, and nothing is said of
// it; a fence alone (purser.SpendFence) still is said, with what bounds it. The engine makes the same
// check before every call; this one says so before a database is opened.
func CheckUnpriced(w io.Writer, backends engine.BackendResolver, tasks []purser.Task, run *budget.Config, prices *pricing.Catalogue) error {
	var errs []error
	said := map[string]bool{}
	for _, t := range tasks {
		for _, model := range callModels(t) {
			fenced := fencesUSD(backends, t, model)
			u := engine.CheckUnpriced(prices, t, run, model, fenced)
			switch {
			case u == nil:
			case u.Refused != nil:
				errs = append(errs, u.Refused)
			case reportsUSD(backends, t, model):
			case !said[t.Backend.Name+"\x00"+model]:
				said[t.Backend.Name+"\x00"+model] = true
				fmt.Fprintln(w, "purser:", u.Warning())
			}
		}
	}
	return errors.Join(errs...)
}

// fencesUSD says whether task's backend bounds a call's money on model
// itself (purser.SpendFence).
func fencesUSD(backends engine.BackendResolver, t purser.Task, model string) bool {
	f, ok := resolved[purser.SpendFence](backends, t)
	return ok && f.FencesUSD(model)
}

// reportsUSD says whether task's backend reports every dollar of a call on
// model as it streams (purser.USDReporter).
func reportsUSD(backends engine.BackendResolver, t purser.Task, model string) bool {
	r, ok := resolved[purser.USDReporter](backends, t)
	return ok && r.ReportsUSD(model)
}

// resolved is task's backend as an I, if it is one.
func resolved[I any](backends engine.BackendResolver, t purser.Task) (I, bool) {
	var none I
	if backends == nil {
		return none, false
	}
	b, err := backends(t.Backend)
	if err != nil {
		return none, false
	}
	i, ok := b.(I)
	return i, ok
}

// unpricedWarnings filters the engine's warnings of unpriced models (one
// per task and model) down to what CheckUnpriced says: nothing for a
// backend that reports every dollar, and once per backend and model
// otherwise.
type unpricedWarnings struct {
	mu    sync.Mutex
	quiet map[string]bool // task ID and warning prefix of a model whose every dollar is reported
	said  map[string]bool // warning prefixes already passed on
}

// newUnpricedWarnings knows the tasks' models whose every dollar is
// reported.
func newUnpricedWarnings(backends engine.BackendResolver, tasks []purser.Task) *unpricedWarnings {
	u := &unpricedWarnings{quiet: map[string]bool{}, said: map[string]bool{}}
	for _, t := range tasks {
		for _, model := range callModels(t) {
			if reportsUSD(backends, t, model) {
				u.quiet[t.ID+"\x00"+unpricedPrefix(t.Backend.Name, model)] = true
			}
		}
	}
	return u
}

// unpricedPrefix is how the engine's warning of an unpriced model begins
// (engine.Unpriced.Warning), whatever bounds the call.
func unpricedPrefix(backend, model string) string {
	name := "the backend's default model (none is configured)"
	if model != "" {
		name = fmt.Sprintf("model %q", model)
	}
	return fmt.Sprintf("warning: %s of backend %s has no price in Purser's catalogue", name, backend)
}

// pass says whether ev is to be passed on.
func (u *unpricedWarnings) pass(ev purser.Event) bool {
	if ev.Type != purser.EventWarning || !strings.Contains(ev.Message, " has no price in Purser's catalogue") || strings.Contains(ev.Message, "Refused before spending") {
		return true
	}
	prefix, _, _ := strings.Cut(ev.Message, " has no price in Purser's catalogue")
	prefix += " has no price in Purser's catalogue"
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.quiet[ev.TaskID+"\x00"+prefix] || u.said[prefix] {
		return false
	}
	u.said[prefix] = true
	return true
}

// SplitNames is a comma-separated list's names, trimmed, empty ones left
// out.
func SplitNames(list string) []string {
	var names []string
	for n := range strings.SplitSeq(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// DrawFrom records that the run draws from the named budgets listed
// (comma-separated, --draw-from) and returns the run's name: a run that has
// none is given one, since draws are recorded against the run before it
// starts.
func DrawFrom(ctx context.Context, s purser.NamedBudgets, db Database, runName, list string) (string, error) {
	names := SplitNames(list)
	if len(names) == 0 {
		return runName, BadInput(fmt.Errorf("--draw-from %q: want named budgets, comma-separated", list))
	}
	if runName == "" {
		runName = "run-" + time.Now().UTC().Format("20060102T150405.000000000")
	}
	if err := s.DrawFrom(ctx, runName, names); err != nil {
		if errors.Is(err, purser.ErrNotFound) {
			return runName, BadInput(fmt.Errorf("--draw-from: %w in the database %s (create it there with purser budgets create NAME --file FILE --window month)", err, db))
		}
		return runName, err
	}
	return runName, nil
}

// Draws is the named budgets a queued run draws from: those of flag
// (--draw-from, comma-separated) and of the task files' drawFrom:, each
// checked to exist, so that a name the database does not know is bad input
// naming it and where it came from (before anything is queued or run).
func Draws(ctx context.Context, s purser.NamedBudgets, db Database, flag string, files []string, tasks []purser.Task) ([]string, error) {
	type draw struct{ name, from string }
	var draws []draw
	if flag != "" {
		names := SplitNames(flag)
		if len(names) == 0 {
			return nil, BadInput(fmt.Errorf("--draw-from %q: want named budgets, comma-separated", flag))
		}
		for _, n := range names {
			if err := purser.ValidateBudgetName(n); err != nil {
				return nil, BadInput(fmt.Errorf("--draw-from: %w", err))
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
			return nil, BadInput(fmt.Errorf("%s: no named budget %q in the database %s (create it there with purser budgets create %s --file FILE --window month)", d.from, d.name, db, d.name))
		} else if err != nil {
			return nil, err
		}
		names = append(names, d.name)
	}
	slices.Sort(names)
	return names, nil
}
