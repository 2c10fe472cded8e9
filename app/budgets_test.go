package app

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
)

// The budgets database is found by one rule, each step naming itself:
// --budgets-db, PURSER_BUDGETS_DB, budgets: in purser.yaml, the project's
// database when it is PostgreSQL (one database, no copy), else the
// user-level default in $XDG_STATE_HOME.
func TestLocateBudgetsAppliesOneRule(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv("PURSER_BUDGETS_DB", "")
	file := &config.Project{Dir: "/r", File: "/r/purser.yaml"}
	fileDB := Database{Path: "/s/purser.db"}
	pgURL := "postgres://u:secret@db:5432/fleet"
	pgDB := Database{Path: pgURL}
	withYAML := &config.Project{Dir: "/r", File: "/r/purser.yaml", Budgets: "/t/team.db"}
	for _, tc := range []struct {
		name, flag, env string
		proj            *config.Project
		db              Database
		path, from      string
	}{
		{"default", "", "", file, fileDB, filepath.Join(state, "purser", "budgets.db"), "the default for this user"},
		{"postgres project", "", "", file, pgDB, pgURL, "the project's database, PostgreSQL (the fleet's)"},
		{"budgets:", "", "", withYAML, pgDB, "/t/team.db", "budgets: in /r/purser.yaml"},
		{"env", "", "/e/b.db", withYAML, fileDB, "/e/b.db", "PURSER_BUDGETS_DB"},
		{"flag", "/f/b.db", "/e/b.db", withYAML, fileDB, "/f/b.db", "--budgets-db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PURSER_BUDGETS_DB", tc.env)
			got := LocateBudgets(tc.flag, tc.proj, tc.db)
			if got.Path != tc.path || got.From != tc.from {
				t.Fatalf("LocateBudgets: %s (%s), want %s (%s)", got.Path, got.From, tc.path, tc.from)
			}
		})
	}
	if s := LocateBudgets("", file, pgDB).String(); strings.Contains(s, "secret") {
		t.Fatalf("the budgets database shown with its password: %s", s)
	}
}

// userProject opens a project of its own (its own SQLite database) whose
// named budgets are in the user-level default under state.
func userProject(t *testing.T, state string) *App {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv("PURSER_BUDGETS_DB", "")
	a, err := Open(context.Background(), Options{Project: project(t, filepath.Join(t.TempDir(), "purser.db")), Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// createTeam creates the named budget team in the user-level database
// under state, as purser budgets create does.
func createTeam(t *testing.T, state string, tokens int64) {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", state)
	b, closeDB, err := OpenBudgets(context.Background(), Options{Project: project(t, filepath.Join(t.TempDir(), "x.db")), Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB()
	if err := b.Named.CreateBudget(context.Background(), purser.NamedBudget{Name: "team", Window: purser.WindowMonth,
		Budget: budget.Config{Hard: budget.HardLimits{Tokens: &tokens}}}); err != nil {
		t.Fatal(err)
	}
}

func used(key, task, run string, tokens int64) purser.LedgerEntry {
	return purser.LedgerEntry{Key: key, TaskID: task, RunID: run, At: time.Now(), Event: budget.UsageEvent{InputTokens: tokens}}
}

// teamSpent is the team budget's spend as a's budgets database has it.
func teamSpent(t *testing.T, a *App) int64 {
	t.Helper()
	b, err := a.NamedBudgets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.Named.NamedBudgetStatus(context.Background(), "team", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return st.Spent.Tokens
}

// Two projects draw from one team budget in the user-level database: its
// spend is both projects' usage; a run of the same name in each is two
// runs; a run drawing from nothing is not counted. A process that died
// between the project's append and the copy is healed by the next
// process's first append of the task, each entry once.
func TestTwoProjectsShareTheUserLevelBudget(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	createTeam(t, state, 100_000)
	a, b := userProject(t, state), userProject(t, state)
	for _, p := range []*App{a, b} {
		if _, err := p.DrawFrom(ctx, "nightly", "team"); err != nil {
			t.Fatal(err)
		}
	}
	ba, err := a.NamedBudgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !ba.Apart || ba.DB.From != fromUserDefault {
		t.Fatalf("project a's budgets: %s, apart %v; want the user-level default, apart", ba.DB, ba.Apart)
	}
	// Project a's process dies after its ledger took the entry, before the copy.
	if err := a.Store.AppendUsage(ctx, used("c1/0", "t", "nightly", 1000)); err != nil {
		t.Fatal(err)
	}
	sa, err := newCopyingStore(a.Store, a.DB, ba)
	if err != nil {
		t.Fatal(err)
	}
	// The next process's first append copies the task's whole ledger; a
	// batch may hold several tasks and runs, and entries seen before.
	if err := sa.AppendUsage(ctx, used("c2/0", "t", "nightly", 10), used("c2/0", "t", "nightly", 10), used("o/0", "u", "other", 7)); err != nil {
		t.Fatal(err)
	}
	bb, err := b.NamedBudgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := newCopyingStore(b.Store, b.DB, bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.AppendUsage(ctx, used("c1/0", "t", "nightly", 300)); err != nil {
		t.Fatal(err)
	}
	if got := teamSpent(t, a); got != 1000+10+300 {
		t.Fatalf("team spent %d tokens, want 1,310: project a's 1,010 (healed, each once) and project b's 300", got)
	}
}

// failOnce is a budgets database whose first copy fails.
type failOnce struct {
	purser.NamedUsage
	failed bool
}

func (f *failOnce) AppendNamedUsage(ctx context.Context, entries ...purser.LedgerEntry) error {
	if !f.failed {
		f.failed = true
		return errors.New("database is locked")
	}
	return f.NamedUsage.AppendNamedUsage(ctx, entries...)
}

// A copy that fails is an error naming both databases; the task's next
// append copies what was missed.
func TestAFailedCopyIsHealedByTheNextAppend(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	createTeam(t, state, 100_000)
	a := userProject(t, state)
	if _, err := a.DrawFrom(ctx, "nightly", "team"); err != nil {
		t.Fatal(err)
	}
	ba, err := a.NamedBudgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newCopyingStore(a.Store, a.DB, ba)
	if err != nil {
		t.Fatal(err)
	}
	s.copies = &failOnce{NamedUsage: s.copies}
	err = s.AppendUsage(ctx, used("c1/0", "t", "nightly", 1000))
	if err == nil || !strings.Contains(err.Error(), "not copied to the budgets database "+ba.DB.String()) {
		t.Fatalf("a failed copy: %v, want an error naming the budgets database", err)
	}
	if got := teamSpent(t, a); got != 0 {
		t.Fatalf("team spent %d tokens after the failed copy, want 0", got)
	}
	if err := s.AppendUsage(ctx, used("c1/1", "t", "nightly", 20)); err != nil {
		t.Fatal(err)
	}
	if got := teamSpent(t, a); got != 1020 {
		t.Fatalf("team spent %d tokens, want 1,020: the missed entry copied with the next", got)
	}
}

// A project whose own database already holds named budgets keeps them
// there (nothing made before the user-level default is lost), and says
// why; a missing user-level database is made by no reading command.
func TestAnOldProjectKeepsItsBudgets(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	a := userProject(t, state)
	tokens := int64(5)
	if err := a.Store.CreateBudget(ctx, purser.NamedBudget{Name: "old", Window: purser.WindowDay, Budget: budget.Config{Hard: budget.HardLimits{Tokens: &tokens}}}); err != nil {
		t.Fatal(err)
	}
	b, err := a.NamedBudgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.Apart || !strings.Contains(b.DB.From, "holds named budgets made before the user-level default") {
		t.Fatalf("budgets: %s, apart %v; want the project's own, saying why", b.DB, b.Apart)
	}
	if _, err := b.Named.NamedBudget(ctx, "old"); err != nil {
		t.Fatalf("the old budget: %v", err)
	}
	fresh := userProject(t, state)
	fb, err := fresh.NamedBudgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fb.Named.NamedBudget(ctx, "team"); !errors.Is(err, purser.ErrNotFound) {
		t.Fatalf("a budget in a user-level database never made: %v, want not found", err)
	}
	if m, _ := filepath.Glob(filepath.Join(state, "purser", "budgets.db")); len(m) != 0 {
		t.Fatalf("reading made the user-level database: %v", m)
	}
	// Made meanwhile (a worker's next job), it is found.
	createTeam(t, state, 10)
	if fb, err = fresh.NamedBudgets(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := fb.Named.NamedBudget(ctx, "team"); err != nil {
		t.Fatalf("the budget created since the first look: %v", err)
	}
}

// A project is known by its database's place however it was named, so
// that purser submit and a worker given it another way (relative,
// absolute) record and copy one run; two places are two projects.
func TestProjectLabelIsThePlace(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	abs := filepath.Join(dir, "q", "purser.db")
	if a, b := projectLabel("q/purser.db"), projectLabel(abs); a != b {
		t.Fatalf("one database, two labels: %s and %s", a, b)
	}
	if a, b := projectLabel(abs), projectLabel(filepath.Join(dir, "r", "purser.db")); a == b {
		t.Fatalf("two databases, one label: %s", a)
	}
	def := filepath.Join(dir, "purser", "projects", "api-1a2b3c4d5e6f", "purser.db")
	if got := projectLabel(def); got != "api-1a2b3c4d5e6f" {
		t.Fatalf("the default location's label: %s, want its folder's name (already hashed)", got)
	}
	if got := projectLabel("postgres://u:secret@h/db"); strings.Contains(got, "secret") {
		t.Fatalf("a label shows the password: %s", got)
	}
}

// The holds a dead process left are found and dropped in both databases:
// on its runs in the project's, on named budgets in the budgets database.
func TestADeadProcessesHoldsAreDroppedInBothDatabases(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	createTeam(t, state, 100_000)
	a := userProject(t, state)
	b, err := a.NamedBudgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dead := purser.Holder{Owner: "host 1 2", TaskID: "t"}
	want := budget.Amount{Tokens: 100}
	if _, err := a.Store.ReserveRun(ctx, "r", dead, budget.Amount{Tokens: 1000, USD: budget.Unlimited.USD}, want, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Named.ReserveNamed(ctx, "team", dead, want, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	both := bothHolds{SharedRunBudget: a.Store, project: a.Store, budgets: b.store}
	holders, err := both.Holders(ctx)
	if err != nil || len(holders) != 1 || holders[0] != dead {
		t.Fatalf("holders %v (%v), want the dead one once", holders, err)
	}
	dropped, err := both.DropHolds(ctx, dead.Owner, "")
	if err != nil {
		t.Fatal(err)
	}
	var scopes []budget.Scope
	for _, d := range dropped {
		scopes = append(scopes, d.Scope)
	}
	if len(dropped) != 2 || !slices.Contains(scopes, budget.ScopeRun) || !slices.Contains(scopes, budget.ScopeNamed) {
		t.Fatalf("dropped %+v; want the run's hold and the named budget's", dropped)
	}
	st, err := b.Named.NamedBudgetStatus(ctx, "team", time.Now())
	if err != nil || st.Held.Tokens != 0 {
		t.Fatalf("team still holds %d tokens (%v)", st.Held.Tokens, err)
	}
}
