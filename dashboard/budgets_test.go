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
