package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
)

// project is a project whose database is the SQLite file db.
func project(t *testing.T, db string) *config.Project {
	t.Helper()
	t.Setenv("PURSER_DB", "")
	return &config.Project{Dir: t.TempDir(), Database: db}
}

// A task whose workspace holds the database is refused before the
// database is opened: nothing is created, and the refusal is bad input.
func TestOpenRefusesADatabaseInAWorkspaceBeforeOpeningIt(t *testing.T) {
	ws := t.TempDir()
	db := filepath.Join(ws, "purser.db")
	_, err := Open(context.Background(), Options{Project: project(t, db), Create: true,
		Preflight: Preflight{Tasks: []purser.Task{{ID: "t", Workspace: ws}}}})
	if !IsBadInput(err) || !strings.Contains(err.Error(), "holds the database in use") {
		t.Fatalf("Open: %v, want bad input naming the database in the workspace", err)
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused database was created: %v", err)
	}
}

// A reading command finds no database where none was made: bad input that
// says where it looked, and none is created.
func TestOpenToReadCreatesNoDatabase(t *testing.T) {
	db := filepath.Join(t.TempDir(), "purser.db")
	_, err := Open(context.Background(), Options{Project: project(t, db)})
	if !IsBadInput(err) || !strings.Contains(err.Error(), "no database at "+db) {
		t.Fatalf("Open: %v, want bad input naming %s", err, db)
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reading made a database: %v", err)
	}
}

// Submit queues each task once, records the run's draws before any job, and
// refuses to join a run under another budget.
func TestSubmitQueuesEachTaskOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	proj := project(t, filepath.Join(dir, "purser.db"))
	a, err := Open(ctx, Options{Project: proj, Create: true, Queue: "submit"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Queue == nil {
		t.Fatal("opened for the queue without one")
	}
	hard := budget.USD(1_000_000_000)
	if err := a.Store.CreateBudget(ctx, purser.NamedBudget{Name: "team", Window: purser.WindowMonth,
		Budget: budget.Config{Hard: budget.HardLimits{USD: &hard}}}); err != nil {
		t.Fatal(err)
	}
	sub := Submission{Run: "r", Draws: "team", Files: []string{filepath.Join(dir, "t.yaml")},
		Tasks: []purser.Task{{ID: "t", Workspace: t.TempDir()}}}
	var got []Submitted
	for range 2 {
		if err := a.Submit(ctx, sub, func(s Submitted) { got = append(got, s) }); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || !got[0].Queued || got[1].Queued || got[0].File != sub.Files[0] {
		t.Fatalf("submitted twice: %+v, want queued once then left as it was", got)
	}
	if draws, err := a.Store.RunDraws(ctx, "r"); err != nil || len(draws) != 1 || draws[0] != "team" {
		t.Fatalf("the run draws from %v (%v), want [team]", draws, err)
	}
	if rec, err := a.Store.Task(ctx, "t"); err != nil || rec.State != purser.StatePending {
		t.Fatalf("the submitted task is %+v (%v), want PENDING", rec, err)
	}
	other := budget.USD(2_000_000_000)
	a.RunBudget = &budget.Config{Hard: budget.HardLimits{USD: &other}}
	if err := a.Submit(ctx, sub, func(Submitted) {}); !IsBadInput(err) || !strings.Contains(err.Error(), "joining it with a different budget") {
		t.Fatalf("joining run r under another budget: %v, want bad input", err)
	}
}

// A task's drawFrom: naming a budget the database does not know fails the
// preflight, naming the file it came from.
func TestPreflightChecksTheDraws(t *testing.T) {
	ctx := context.Background()
	a, err := Open(ctx, Options{Project: project(t, filepath.Join(t.TempDir(), "purser.db")), Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	err = a.Preflight(ctx, Preflight{Tasks: []purser.Task{{ID: "t", Workspace: t.TempDir(), DrawFrom: []string{"nope"}}},
		Files: []string{"t.yaml"}, Draws: true})
	if !IsBadInput(err) || !strings.Contains(err.Error(), `t.yaml (drawFrom:): no named budget "nope"`) {
		t.Fatalf("Preflight: %v, want bad input naming the file and the budget", err)
	}
}
