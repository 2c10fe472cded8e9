package app

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
)

// countingStore counts the reads of the forecast's history and refuses the
// ledger: the forecast reads stored totals only.
type countingStore struct {
	Store
	t                    *testing.T
	tasks, totals, calls atomic.Int64
}

func (s *countingStore) Tasks(ctx context.Context) ([]purser.TaskRecord, error) {
	s.tasks.Add(1)
	return s.Store.Tasks(ctx)
}

func (s *countingStore) UsageTotals(ctx context.Context, id string) (budget.Totals, error) {
	s.totals.Add(1)
	return s.Store.UsageTotals(ctx, id)
}

func (s *countingStore) CallUsage(ctx context.Context, id string) ([]purser.CallUsage, error) {
	s.calls.Add(1)
	return s.Store.CallUsage(ctx, id)
}

func (s *countingStore) Usage(context.Context, string) ([]purser.LedgerEntry, error) {
	s.t.Error("the forecast's history scanned the ledger")
	return nil, fmt.Errorf("no ledger scans")
}

// addTask records a task that spent usd in one call of model m, in state.
func addTask(t *testing.T, s Store, id string, usd budget.USD, state purser.TaskState) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	if err := s.SaveTask(ctx, purser.TaskRecord{ID: id, RunID: "r", Goal: "g", Workspace: "/w/" + id, State: state, CreatedAt: at, UpdatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: id + "/1", TaskID: id, RunID: "r", CallID: id + "-c1", Iteration: 1, Kind: purser.CallMain, At: at,
		Event: budget.UsageEvent{Model: "m", InputTokens: 100, USD: usd, CostSource: budget.CostReported}}); err != nil {
		t.Fatal(err)
	}
}

// The forecast's history is read from stored totals, fitted once, and read
// and fitted again — only what changed — when a run finishes.
func TestStoredForecastsFollowFinishedRunsWithoutTheLedger(t *testing.T) {
	ctx := context.Background()
	raw, err := OpenStore(ctx, Database{Path: filepath.Join(t.TempDir(), "p.db"), From: "--db"}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := raw.SaveRun(ctx, purser.Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		addTask(t, raw, fmt.Sprintf("done-%02d", i), budget.USD(i+1)*budget.NanosPerDollar/10, purser.StateDone)
	}
	addTask(t, raw, "live", budget.NanosPerDollar/10, purser.StateRunning)
	s := &countingStore{Store: raw, t: t}
	a := &App{Store: s, Project: &config.Project{Dir: t.TempDir()}}
	sf := a.StoredForecasts(time.Nanosecond) // read again at every look: serve, in a hurry

	first := sf.Forecast(ctx, "live")
	if first == nil || !first.OK || first.Runs != 30 {
		t.Fatalf("forecast %+v, want one read from the 30 finished runs", first)
	}
	reads := s.totals.Load() + s.calls.Load()
	for range 3 {
		time.Sleep(time.Millisecond)
		if again := sf.Forecast(ctx, "live"); again == nil || *again != *first {
			t.Fatalf("forecast moved with nothing finished: %+v, was %+v", again, first)
		}
	}
	if more := s.totals.Load() + s.calls.Load() - reads; more != 3 {
		t.Errorf("%d reads of tasks' totals while nothing changed (the Forecast's own only: 3 expected)", more)
	}

	// A run finishes: the history has it at the next look.
	addTask(t, raw, "done-big", 9*budget.NanosPerDollar, purser.StateDone)
	next := sf.Forecast(ctx, "live")
	if next == nil || next.Runs != 31 || next.High <= first.High {
		t.Fatalf("after a $9 run finished: %+v, want 31 runs and a higher upper bound than %s", next, first.High)
	}

	// A reader that never refreshes (status) reads it once.
	once := a.StoredForecasts(0)
	tasks := s.tasks.Load()
	for range 3 {
		once.Forecast(ctx, "live")
	}
	if n := s.tasks.Load() - tasks; n != 1 {
		t.Errorf("status read the task list %d times for 3 forecasts, want once", n)
	}
}
