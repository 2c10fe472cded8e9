package app

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
)

// addCalls records a task of budget cfg in state, with one call of model m
// per event.
func addCalls(t *testing.T, s Store, id string, cfg budget.Config, state purser.TaskState, evs ...budget.UsageEvent) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	if err := s.SaveTask(ctx, purser.TaskRecord{ID: id, RunID: "r", Goal: "g", Workspace: "/w/" + id, Budget: cfg, State: state, CreatedAt: at, UpdatedAt: at}); err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		ev.Model = "m"
		if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: fmt.Sprintf("%s/%d", id, i), TaskID: id, RunID: "r", CallID: fmt.Sprintf("%s-c%d", id, i),
			Iteration: i + 1, Kind: purser.CallMain, At: at, Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
}

func openTestStore(t *testing.T) Store {
	t.Helper()
	ctx := context.Background()
	s, err := OpenStore(ctx, Database{Path: filepath.Join(t.TempDir(), "p.db"), From: "--db"}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.SaveRun(ctx, purser.Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	return s
}

// A task whose calls were priced only in part stays out of the money
// forecast's history (its known part is a lower bound) and in the tokens
// forecast's; a task capped on tokens gets the tokens forecast beside the
// money one, as status and the dashboard show it.
func TestPartlyUnpricedRunsStayInTheTokensHistory(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t)
	reported := func(tokens int64, usd budget.USD) budget.UsageEvent {
		return budget.UsageEvent{InputTokens: tokens, USD: usd, CostSource: budget.CostReported}
	}
	for i := range 24 {
		n := int64(i+1) * 10_000
		addCalls(t, s, fmt.Sprintf("priced-%02d", i), budget.Config{}, purser.StateDone, reported(n, budget.USD(n)*1000))
	}
	for i := range 6 {
		n := int64(i+1) * 50_000
		addCalls(t, s, fmt.Sprintf("partial-%02d", i), budget.Config{}, purser.StateBlocked,
			reported(n, budget.USD(n)*1000), budget.UsageEvent{InputTokens: n, CostSource: budget.CostUnknown})
	}
	capped := budget.Config{Hard: budget.HardLimits{Tokens: ptr[int64](400_000), MaxIterations: ptr(5)}}
	addCalls(t, s, "live", capped, purser.StateRunning, reported(5_000, 5_000_000))
	a := &App{Store: s, Project: &config.Project{Dir: t.TempDir()}}

	fc := a.StoredForecasts(0).Forecast(ctx, "live")
	if fc == nil || !fc.OK || fc.Runs != 24 {
		t.Fatalf("money forecast %+v: want one read from the 24 runs priced in full", fc)
	}
	if fc.Tokens == nil || !fc.Tokens.OK || fc.Tokens.Runs != 30 || fc.Tokens.Reached != 30 {
		t.Fatalf("tokens forecast %+v: want one read from all 30 finished runs", fc.Tokens)
	}
	// The six partly priced runs used 100k–600k tokens each; with them the
	// upper bound is past the priced runs' largest, 240k.
	if fc.Tokens.High <= 240_000 {
		t.Errorf("tokens upper bound %d: the partly priced runs were not read", fc.Tokens.High)
	}
	b, err := json.Marshal(fc)
	if err != nil || !json.Valid(b) {
		t.Fatalf("marshal: %v", err)
	}
	var back struct {
		Tokens struct {
			High int64 `json:"highTokens"`
		} `json:"tokens"`
	}
	if err := json.Unmarshal(b, &back); err != nil || back.Tokens.High != fc.Tokens.High {
		t.Errorf("status --json carries %s, want the tokens forecast's figures", b)
	}
}

// A resumed task's alerts start from WARNING when the forecast trigger put
// it there and its hard caps are those it fired under; a raised cap, or no
// record, leaves the recorded status.
func TestAlertBaselineKeepsTheForecastWarning(t *testing.T) {
	ctx := context.Background()
	cfg := budget.Config{Warning: budget.Limits{Forecast: budget.ForecastHard}, Hard: budget.HardLimits{USD: ptr(budget.Dollars(3)), MaxIterations: ptr(5)}}
	record := func(s Store, id string, hard budget.USD) {
		b, _ := json.Marshal(purser.ForecastWarning{Why: "forecast to finish $2.00 (80 %: $0.40–$4.00) passes the hard $3.00", HardUSD: &hard})
		if err := s.SaveArtifact(ctx, id, purser.ForecastWarningArtifact, b); err != nil {
			t.Fatal(err)
		}
	}
	s := openTestStore(t)
	spent := budget.UsageEvent{InputTokens: 100, USD: budget.Dollars(1) / 2, CostSource: budget.CostReported}
	for _, id := range []string{"fired", "raised", "never"} {
		addCalls(t, s, id, cfg, purser.StatePending, spent)
	}
	record(s, "fired", budget.Dollars(3))
	record(s, "raised", budget.Dollars(2)) // fired under a lower cap than the budget now has
	for id, want := range map[string]budget.Tier{"fired": budget.Warning, "raised": budget.Optimal, "never": budget.Optimal} {
		st, state, err := alertBaseline(ctx, s, id)
		if err != nil || st.Tier != want || state != purser.StatePending {
			t.Errorf("%s: baseline %s %s (%v), want %s PENDING", id, st.Tier, state, err, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
