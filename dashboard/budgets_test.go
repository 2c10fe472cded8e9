package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/dashboard"
)

// brokenBudgets is a store whose named budgets cannot be read.
type brokenBudgets struct{ purser.Store }

func (brokenBudgets) NamedBudgetList(context.Context) ([]purser.NamedBudget, error) {
	return nil, errors.New("named_budgets: disk I/O error")
}

func (brokenBudgets) NamedBudgetStatus(context.Context, string, time.Time) (purser.NamedBudgetStatus, error) {
	return purser.NamedBudgetStatus{}, errors.New("named_budgets: disk I/O error")
}

// A store whose named budgets cannot be read still shows its runs: the
// tree is left out (and logged), not the whole page.
func TestSnapshotShowsTheRunsWhenTheBudgetsCannotBeRead(t *testing.T) {
	srv := httptest.NewServer(dashboard.NewHandler(brokenBudgets{filledStore(t)}, dashboard.Options{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/snapshot")
	must(t, err)
	defer resp.Body.Close()
	var snap dashboard.Snapshot
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&snap) != nil {
		t.Fatalf("snapshot: %s", resp.Status)
	}
	if len(snap.Runs) == 0 || snap.Budgets == nil || len(snap.Budgets) != 0 {
		t.Errorf("snapshot has %d runs and budgets %v; want the runs and an empty tree", len(snap.Runs), snap.Budgets)
	}
}

// oneBudget is a budgets database apart from the store, holding "team".
type oneBudget struct{}

func (oneBudget) NamedBudgetList(context.Context) ([]purser.NamedBudget, error) {
	return []purser.NamedBudget{{Name: "team", Window: purser.WindowMonth}}, nil
}

func (oneBudget) NamedBudgetStatus(_ context.Context, name string, now time.Time) (purser.NamedBudgetStatus, error) {
	return purser.NamedBudget{Name: name, Window: purser.WindowMonth}.StatusAt(now)
}

// The tree is read where Options.Budgets says the named budgets are (the
// user-level database), not in the store, whose own are left unread.
func TestSnapshotReadsTheTreeFromTheBudgetsDatabase(t *testing.T) {
	srv := httptest.NewServer(dashboard.NewHandler(brokenBudgets{filledStore(t)}, dashboard.Options{Budgets: oneBudget{}}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/snapshot")
	must(t, err)
	defer resp.Body.Close()
	var snap dashboard.Snapshot
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&snap) != nil {
		t.Fatalf("snapshot: %s", resp.Status)
	}
	if len(snap.Budgets) != 1 || snap.Budgets[0].Name != "team" {
		t.Errorf("snapshot's tree %v; want team, from the budgets database", snap.Budgets)
	}
}
