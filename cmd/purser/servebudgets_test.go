package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
)

// A dashboard started before the user-level budgets database was made
// shows the tree once it is: the named budgets are looked for again at
// each read until found, not taken as none for good.
func TestServeFindsBudgetsMadeAfterItStarted(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv("PURSER_BUDGETS_DB", "")
	dir := t.TempDir()
	proj := &config.Project{Dir: dir}
	a, err := app.Open(ctx, app.Options{DB: filepath.Join(dir, "p.db"), Project: proj, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	reader := appBudgets{a}
	if list, err := reader.NamedBudgetList(ctx); err != nil || len(list) != 0 {
		t.Fatalf("before the budgets database exists: %v (%v), want none and no error", list, err)
	}
	made, closeMade, err := app.OpenBudgets(ctx, app.Options{DB: filepath.Join(dir, "p.db"), Project: proj, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := budget.Config{Hard: budget.HardLimits{Tokens: ptrTo(int64(1000))}}
	if err := made.Named.CreateBudget(ctx, purser.NamedBudget{Name: "team", Budget: cfg, Window: purser.WindowMonth, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	_ = closeMade()
	list, err := reader.NamedBudgetList(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "team" {
		t.Fatalf("after the budgets database was made: %v (%v), want team", list, err)
	}
}

func ptrTo[T any](v T) *T { return &v }
