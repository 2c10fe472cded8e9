package report_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/report"
	"github.com/purser-dev/purser/sqlite"
)

// subAgentReport is a DONE task whose main call delegated to two Claude Code
// sub-agents, read back from a real ledger (SQLite) as `purser` reads it.
func subAgentReport(t *testing.T, agents ...string) report.Report {
	t.Helper()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "purser.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	at := time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)
	iters := 5
	cfg := budget.Config{Hard: budget.HardLimits{USD: usd("5"), MaxIterations: &iters}}
	m, err := budget.NewManager(cfg, budget.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var entries []purser.LedgerEntry
	for i, a := range agents {
		model := "claude-opus-4-8"
		if a != "" {
			model = "claude-haiku-4-5"
		}
		ev := budget.UsageEvent{Model: model, InputTokens: int64(1000 * (i + 1)), OutputTokens: 100, USD: *usd("0.01") * budget.USD(i+1),
			CostSource: budget.CostEstimated, Agent: a}
		m.RecordUsage(ev)
		entries = append(entries, purser.LedgerEntry{Key: "c1/" + string(rune('a'+i)), TaskID: "delegate", CallID: "c1", Iteration: 1,
			Kind: purser.CallMain, Event: ev, At: at})
	}
	if err := s.AppendUsage(ctx, entries...); err != nil {
		t.Fatal(err)
	}
	r, err := report.Load(ctx, s, "delegate")
	if err != nil {
		t.Fatal(err)
	}
	r.Task = purser.Task{ID: "delegate", Goal: "Fix the flaky test.", Budget: cfg}
	r.State, r.Status = purser.StateDone, m.Status()
	r.Calls = []purser.CallRecord{{ID: "c1", Iteration: 1, Kind: purser.CallMain, Attempt: 1, Model: "claude-opus-4-8", Outcome: purser.CallOK}}
	return r
}

func TestBudgetMDBreaksSpendDownBySubAgent(t *testing.T) {
	r := subAgentReport(t, "", "general-purpose: find the flaky test", "", "Explore: read | the tests", "general-purpose: find the flaky test")
	golden(t, "subagents.BUDGET.md", report.BudgetMD(r))
}

func TestBudgetMDHasNoSubAgentSectionForTheMainAgentAlone(t *testing.T) {
	got := string(report.BudgetMD(subAgentReport(t, "", "")))
	if strings.Contains(got, "Per sub-agent") {
		t.Errorf("BUDGET.md has a per-sub-agent section with only the main agent:\n%s", got)
	}
	if !strings.Contains(got, "## Per model") {
		t.Errorf("BUDGET.md lost its per-model section:\n%s", got)
	}
}
