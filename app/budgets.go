package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/postgres"
)

// BudgetsDBFlagHelp is the --budgets-db flag's help: the one rule that
// finds the named budgets' database.
const BudgetsDBFlagHelp = "the named budgets' database: a SQLite file path or a postgres:// URL (default: $PURSER_BUDGETS_DB, else purser.yaml's budgets:, else the project's database when it is PostgreSQL, else $XDG_STATE_HOME/purser/budgets.db, shared by every project of this user)"

// fromUserDefault is the rule that chose the user-level budgets database.
const fromUserDefault = "the default for this user"

// DefaultBudgetsDatabase is where the named budgets live when nothing names
// their database and the project's is a file: one SQLite file in the
// user's state directory ($XDG_STATE_HOME/purser, by default
// ~/.local/state/purser), beside the projects' own databases, so that a
// team's month spans every repository of the user. Without a home
// directory it is .purser/budgets.db in the working directory.
func DefaultBudgetsDatabase() string {
	state := os.Getenv("XDG_STATE_HOME")
	if state == "" || !filepath.IsAbs(state) {
		home, err := os.UserHomeDir()
		if err != nil || home == "" || !filepath.IsAbs(home) {
			return filepath.Join(".purser", "budgets.db")
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(state, "purser", "budgets.db")
}

// LocateBudgets applies the one rule that finds the named budgets'
// database: --budgets-db, then PURSER_BUDGETS_DB, then purser.yaml's
// budgets:, then the project's database when it is PostgreSQL (the
// fleet's: everything in one database), then the user-level default.
func LocateBudgets(flag string, proj *config.Project, project Database) Database {
	db := Database{Durability: project.Durability}
	switch {
	case flag != "":
		db.Path, db.From = absFile(flag), "--budgets-db"
	case os.Getenv("PURSER_BUDGETS_DB") != "":
		db.Path, db.From = absFile(os.Getenv("PURSER_BUDGETS_DB")), "PURSER_BUDGETS_DB"
	case proj.Budgets != "":
		db.Path, db.From = proj.Budgets, "budgets: in "+proj.File
	case !project.IsFile():
		db.Path, db.From = project.Path, "the project's database, PostgreSQL (the fleet's)"
	default:
		db.Path, db.From = absFile(DefaultBudgetsDatabase()), fromUserDefault
	}
	return db
}

// absFile is a SQLite file's path made absolute (a URL as it is), so that
// the project's database and the budgets' compare as places.
func absFile(path string) string {
	if postgres.IsURL(path) || isKeywordDSN(path) {
		return path
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// Budgets is the database the named budgets live in, open, as this
// project's runs use it.
type Budgets struct {
	// DB is where, and the rule that chose it.
	DB Database
	// Named keeps the named budgets. Apart from the project's database, it
	// knows this project's runs by their IDs qualified by the project
	// (Budgets.Run), since several projects' runs draw there.
	Named purser.NamedBudgets
	// Apart says the budgets database is not the project's: the usage of
	// the project's runs drawing from its budgets is copied to it.
	Apart bool

	project *projectBudgets // when Apart
	store   Store           // opened for the budgets (nil: the project's)
}

// Run is runID as the budgets database knows it: qualified by the project
// when the database is apart from the project's.
func (b *Budgets) Run(runID string) string {
	if b.project == nil {
		return runID
	}
	return b.project.run(runID)
}

// legacyBudgets is the rule that keeps an existing project's named budgets
// where it made them, and how to choose otherwise.
func legacyBudgets(project Database) string {
	return fmt.Sprintf("the project's database, which holds named budgets made before the user-level default; "+
		"say budgets: %s in purser.yaml to keep them there, or budgets: %s to share the user's (and create them there with purser budgets create)",
		ShownDatabase(project.Path), absFile(DefaultBudgetsDatabase()))
}

// NamedBudgets opens the named budgets' database (once; Close closes it),
// found by LocateBudgets. A project whose own database already holds named
// budgets and names no budgets database keeps using its own (nothing made
// before the user-level default is lost), and says so in DB.From. A
// database file that does not exist holds no budgets: it is made only by a
// command that creates one (purser budgets create), so that running tasks
// that draw from none leaves no file behind.
func (a *App) NamedBudgets(ctx context.Context) (*Budgets, error) {
	return a.namedBudgets(ctx, a.create)
}

func (a *App) namedBudgets(ctx context.Context, create bool) (*Budgets, error) {
	if a.budgets != nil {
		return a.budgets, nil
	}
	db := LocateBudgets(a.budgetsFlag, a.Project, a.DB)
	if err := refuseKeywordDSN(db); err != nil {
		return nil, err
	}
	if db.From == fromUserDefault && a.Store != nil {
		held, err := a.Store.NamedBudgetList(ctx)
		if err != nil {
			return nil, fmt.Errorf("named budgets in the project's database %s: %w", a.DB, err)
		}
		if len(held) > 0 {
			db = Database{Path: a.DB.Path, From: legacyBudgets(a.DB), Durability: a.DB.Durability}
		}
	}
	same := db.Path == absFile(a.DB.Path) || db.Path == a.DB.Path
	if same && a.Store != nil {
		a.budgets = &Budgets{DB: db, Named: a.Store}
		return a.budgets, nil
	}
	if _, err := os.Stat(db.Path); db.IsFile() && !create && errors.Is(err, os.ErrNotExist) {
		// Not kept: a worker asks again for its next job, by when the
		// database may have been made and a queued run drawn from it.
		return &Budgets{DB: db, Named: noBudgets{}}, nil
	}
	s, err := openBudgetsStore(ctx, db, create || !db.IsFile())
	if err != nil {
		return nil, err
	}
	if same { // the project's database, which this command did not open
		a.budgets = &Budgets{DB: db, Named: s, store: s}
		return a.budgets, nil
	}
	pb := &projectBudgets{NamedBudgets: s, project: projectLabel(a.DB.Path), draws: map[string]bool{}, askedAt: map[string]time.Time{}}
	a.budgets = &Budgets{DB: db, Named: pb, Apart: true, project: pb, store: s}
	return a.budgets, nil
}

// openBudgetsStore opens the budgets database, its folder made for a new
// file; a missing one, not to be created, is bad input naming it.
func openBudgetsStore(ctx context.Context, db Database, create bool) (Store, error) {
	if db.IsFile() && create {
		if err := os.MkdirAll(filepath.Dir(db.Path), 0o700); err != nil {
			return nil, fmt.Errorf("budgets database %s: %w", db, err)
		}
	}
	s, err := OpenStore(ctx, db, create)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, BadInput(fmt.Errorf("no budgets database at %s: no named budget was created there (purser budgets create NAME --file FILE --window month)", db))
		}
		return nil, fmt.Errorf("open the budgets database %s: %w", db, err)
	}
	return s, nil
}

// OpenBudgets opens the named budgets' database for the commands that
// keep them (purser budgets …): the project's database is opened, when it
// exists, only to apply LocateBudgets' rule. close releases both.
func OpenBudgets(ctx context.Context, o Options) (b *Budgets, close func() error, err error) {
	proj := o.Project
	if proj == nil {
		wd, err := os.Getwd()
		if err != nil {
			return nil, nil, err
		}
		if proj, err = config.FindProject(wd); err != nil {
			return nil, nil, BadInput(err)
		}
	}
	a := &App{Project: proj, DB: LocateDatabase(o.DB, proj), stderr: io.Discard, budgetsFlag: o.BudgetsDB, create: o.Create}
	if err := refuseKeywordDSN(a.DB); err != nil {
		return nil, nil, err
	}
	if s, err := OpenStore(ctx, a.DB, false); err == nil {
		a.Store = s
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	if b, err = a.NamedBudgets(ctx); err != nil {
		a.Close()
		return nil, nil, err
	}
	return b, a.Close, nil
}

// closeBudgets closes the budgets database NamedBudgets opened, if any.
func (a *App) closeBudgets() error {
	if a.budgets == nil || a.budgets.store == nil {
		a.budgets = nil
		return nil
	}
	err := a.budgets.store.Close()
	a.budgets = nil
	return err
}

// projectLabel names a project in a budgets database shared by several:
// the folder of its database (for the default location, the project's
// directory's name and hash), and a hash of the database's place, so that
// two projects' runs of one name stay two runs.
func projectLabel(projectDB string) string {
	projectDB = absFile(projectDB) // submit and the workers may name it differently
	sum := sha256.Sum256([]byte(ShownDatabase(projectDB)))
	if postgres.IsURL(projectDB) {
		return "pg-" + hex.EncodeToString(sum[:4])
	}
	dir := filepath.Dir(projectDB)
	if filepath.Base(filepath.Dir(dir)) == "projects" { // config.DefaultDatabase's: named and hashed already
		return filepath.Base(dir)
	}
	return filepath.Base(dir) + "-" + hex.EncodeToString(sum[:4])
}

// projectBudgets is a budgets database apart from the project's, as the
// project's runs draw from it: their IDs qualified by the project.
type projectBudgets struct {
	purser.NamedBudgets
	project string

	mu      sync.Mutex
	draws   map[string]bool      // run (unqualified) → draws from a named budget, once it does
	askedAt map[string]time.Time // run → when it was last found drawing from none
}

func (p *projectBudgets) run(runID string) string { return runID + "@" + p.project }

// DrawFrom records that the project's run draws from the named budgets.
func (p *projectBudgets) DrawFrom(ctx context.Context, runID string, names []string) error {
	err := p.NamedBudgets.DrawFrom(ctx, p.run(runID), names)
	p.mu.Lock()
	delete(p.askedAt, runID)
	p.mu.Unlock()
	return err
}

// RunDraws is the named budgets the project's run draws from and their
// ancestors, roots first.
func (p *projectBudgets) RunDraws(ctx context.Context, runID string) ([]string, error) {
	return p.NamedBudgets.RunDraws(ctx, p.run(runID))
}

// drawing reports whether the project's run draws from a named budget. A
// run that does is remembered (draws are only added); one that does not
// is asked again after notDrawingFor, since another process joining the
// run may record draws for it later.
func (p *projectBudgets) drawing(ctx context.Context, runID string) (bool, error) {
	if runID == "" {
		return false, nil
	}
	p.mu.Lock()
	known, asked := p.draws[runID], p.askedAt[runID]
	p.mu.Unlock()
	if known {
		return true, nil
	}
	if !asked.IsZero() && time.Since(asked) < notDrawingFor {
		return false, nil
	}
	names, err := p.RunDraws(ctx, runID)
	if err != nil {
		return false, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(names) == 0 {
		p.askedAt[runID] = time.Now()
		return false, nil
	}
	p.draws[runID] = true
	return true, nil
}

// notDrawingFor is how long a run found drawing from no named budget is
// taken as still not drawing, so that a run's every ledger append does not
// ask the budgets database. Draws recorded by this process (DrawFrom) are
// seen at once.
const notDrawingFor = time.Second

// errNoCopies is the error for a budgets database that keeps no copies of
// other databases' usage (a store before migration 021 would).
var errNoCopies = errors.New("it keeps no copies of other databases' usage")

// DrawFrom records, in the named budgets' database, that the run draws
// from the named budgets listed (--draw-from, comma-separated) and returns
// the run's name (a run that has none is given one). A name that database
// does not know is bad input naming the database and why it is the one.
func (a *App) DrawFrom(ctx context.Context, runName, list string) (string, error) {
	b, err := a.namedBudgets(ctx, false)
	if err != nil {
		return runName, err
	}
	return DrawFrom(ctx, b.Named, b.DB, runName, list)
}

// RaiseWatch is what a run waiting for a raise reads: its tasks' budget
// changes in the project's database, the named budgets in theirs.
type RaiseWatch struct {
	tasks interface {
		BudgetChanges(ctx context.Context, taskID string) ([]purser.BudgetChange, error)
	}
	named purser.NamedBudgets
}

// RaiseWatch is the project's and the named budgets' databases, as a run
// waiting for a raise reads them (the project's alone when the budgets
// database cannot be opened: a named budget's raise is then not seen).
func (a *App) RaiseWatch(ctx context.Context) RaiseWatch {
	w := RaiseWatch{tasks: a.Store, named: a.Store}
	if b, err := a.namedBudgets(ctx, false); err == nil {
		w.named = b.Named
	}
	return w
}

// BudgetChanges are a task's budget changes, oldest first.
func (w RaiseWatch) BudgetChanges(ctx context.Context, taskID string) ([]purser.BudgetChange, error) {
	return w.tasks.BudgetChanges(ctx, taskID)
}

// NamedBudget is a named budget as its database has it now.
func (w RaiseWatch) NamedBudget(ctx context.Context, name string) (purser.NamedBudget, error) {
	return w.named.NamedBudget(ctx, name)
}

// noBudgets is a budgets database file not made yet: it holds no named
// budget, and no run draws from one.
type noBudgets struct{}

func (noBudgets) notFound(name string) error {
	return fmt.Errorf("named budget %s: %w", name, purser.ErrNotFound)
}

// CreateBudget is refused: a command that creates makes the database.
func (n noBudgets) CreateBudget(_ context.Context, b purser.NamedBudget) error {
	return errors.New("the budgets database was not created")
}

// NamedBudget finds none.
func (n noBudgets) NamedBudget(_ context.Context, name string) (purser.NamedBudget, error) {
	return purser.NamedBudget{}, n.notFound(name)
}

// NamedBudgetList is empty.
func (noBudgets) NamedBudgetList(context.Context) ([]purser.NamedBudget, error) {
	return []purser.NamedBudget{}, nil
}

// SetBudgetParent finds no budget to move.
func (n noBudgets) SetBudgetParent(_ context.Context, name, _, _, _ string, _ time.Time) error {
	return n.notFound(name)
}

// RaiseBudget finds no budget to raise.
func (n noBudgets) RaiseBudget(_ context.Context, r purser.NamedBudgetRaise) error {
	return n.notFound(r.Name)
}

// BudgetRaises finds no budget.
func (n noBudgets) BudgetRaises(_ context.Context, name string) ([]purser.NamedBudgetRaise, error) {
	return nil, n.notFound(name)
}

// DrawFrom finds none of the budgets.
func (n noBudgets) DrawFrom(_ context.Context, _ string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	return n.notFound(names[0])
}

// RunDraws is none: no run draws from a budget here.
func (noBudgets) RunDraws(context.Context, string) ([]string, error) { return nil, nil }

// NamedBudgetStatus finds no budget.
func (n noBudgets) NamedBudgetStatus(_ context.Context, name string, _ time.Time) (purser.NamedBudgetStatus, error) {
	return purser.NamedBudgetStatus{}, n.notFound(name)
}

// ReserveNamed finds no budget.
func (n noBudgets) ReserveNamed(_ context.Context, name string, _ purser.Holder, _ budget.Amount, _ time.Time, _ time.Duration) (func(), error) {
	return nil, n.notFound(name)
}

// ReserveNamedAll finds none of the budgets (and holds nothing for none).
func (n noBudgets) ReserveNamedAll(_ context.Context, names []string, _ purser.Holder, _ budget.Amount, _ time.Time, _ time.Duration) (func(), error) {
	if len(names) == 0 {
		return func() {}, nil
	}
	return nil, n.notFound(names[0])
}
