package engine

import (
	"context"
	"sync"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// runTotalsStore is a store holding only a run's running totals.
type runTotalsStore struct {
	purser.Store
	mu     sync.Mutex
	totals map[string]budget.Totals
}

func (s *runTotalsStore) AppendUsage(_ context.Context, entries ...purser.LedgerEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		t := s.totals[e.RunID]
		t.Add(e.Event)
		s.totals[e.RunID] = t
	}
	return nil
}

func (s *runTotalsStore) RunUsageTotals(_ context.Context, runID string) (budget.Totals, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.totals[runID], nil
}

// The run's Manager in this process takes what other processes spent from
// the store, and never counts its own events twice: not one appended to
// the ledger but not yet recorded on the budget (the read sees it in the
// store), and not one another batch of this process spent (counted by the
// store, as the others' spend).
func TestRunSyncCountsOthersSpendOnce(t *testing.T) {
	store := &runTotalsStore{totals: map[string]budget.Totals{"r": {Tokens: 100}}}
	cfg := Config{Store: store}.WithDefaults()
	hard, iters := int64(1000), 100
	mgr, err := budget.NewManager(budget.Config{Hard: budget.HardLimits{Tokens: &hard, MaxIterations: &iters}},
		budget.Options{Scope: budget.ScopeRun, Initial: budget.Totals{Tokens: 100}})
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{cfg: cfg, runs: newRunSyncs()}
	rs := &runSync{e: e, runID: "r", mgr: mgr, initial: budget.Totals{Tokens: 100}}
	defer e.runs.add(rs, []string{"mine"})()
	other := &runSync{e: e, runID: "r", mgr: mgr, initial: budget.Totals{Tokens: 100}}
	defer e.runs.add(other, []string{"other-batch"})()
	tap := &ledgerTap{Store: store, runs: e.runs}
	ctx := context.Background()
	spend := func(task string, tokens int64) budget.UsageEvent {
		ev := budget.UsageEvent{InputTokens: tokens}
		if err := tap.AppendUsage(ctx, purser.LedgerEntry{Key: task, TaskID: task, RunID: "r", Event: ev}); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	for _, step := range []struct {
		name string
		do   func()
		want int64
	}{
		{"an event of ours in the ledger, not yet on the budget, is not counted as the others'", func() { spend("mine", 50) }, 100},
		{"recorded on the budget, it counts once", func() { mgr.RecordUsage(budget.UsageEvent{InputTokens: 50}) }, 150},
		{"another process's spend counts", func() {
			_ = store.AppendUsage(ctx, purser.LedgerEntry{RunID: "r", Event: budget.UsageEvent{InputTokens: 30}})
		}, 180},
		{"another batch's spend in this process counts as the others'", func() { spend("other-batch", 20) }, 200},
	} {
		step.do()
		rs.refresh(ctx)
		if got := mgr.Totals().Tokens; got != step.want {
			t.Fatalf("%s: the run counts %d tokens, want %d", step.name, got, step.want)
		}
	}
}
