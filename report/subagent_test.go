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

// explainDelegate is purser explain's reading of a DONE task whose agents
// spent as listed ("" the main agent), from a real ledger (SQLite).
func explainDelegate(t *testing.T, agents ...string) report.Explanation {
	t.Helper()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "purser.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	at := time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)
	iters := 5
	rec := purser.TaskRecord{ID: "delegate", Goal: "Fix the flaky test.", Workspace: "/src/api", State: purser.StateDone, Reason: "validators passed",
		Budget: budget.Config{Hard: budget.HardLimits{USD: usd("5"), MaxIterations: &iters}}, CreatedAt: at, UpdatedAt: at}
	if err := s.SaveTask(ctx, rec); err != nil {
		t.Fatal(err)
	}
	var entries []purser.LedgerEntry
	for i, a := range agents {
		ev := budget.UsageEvent{Model: "claude-sonnet-4-5", InputTokens: int64(1000 * (i + 1)), OutputTokens: 50, USD: *usd("0.01") * budget.USD(i+1),
			CostSource: budget.CostEstimated, Agent: a}
		entries = append(entries, purser.LedgerEntry{Key: "c1/" + string(rune('a'+i)), TaskID: "delegate", CallID: "c1", Iteration: 1,
			Kind: purser.CallMain, Event: ev, At: at})
	}
	if err := s.AppendUsage(ctx, entries...); err != nil {
		t.Fatal(err)
	}
	e, err := report.ReadExplanation(ctx, s, "delegate", func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// purser explain says what each agent spent when a sub-agent spent any
// (the main agent first, each sub-agent by its name, summed over its
// requests), in words and in --json; with the main agent alone it says
// nothing of agents.
func TestExplainSaysSpendPerSubAgent(t *testing.T) {
	e := explainDelegate(t, "", "general-purpose: part 1", "", "general-purpose: part 2", "general-purpose: part 1")
	var b strings.Builder
	if err := e.Write(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "subagents.explain.txt", []byte(b.String()))
	j := e.JSON()
	want := []report.AgentSpendJSON{
		{Agent: report.MainAgent, Calls: 1, Tokens: 1050 + 3050, USD: *usd("0.04"), USDSource: "estimated"},
		{Agent: "general-purpose: part 1", Calls: 1, Tokens: 2050 + 5050, USD: *usd("0.07"), USDSource: "estimated"},
		{Agent: "general-purpose: part 2", Calls: 1, Tokens: 4050, USD: *usd("0.04"), USDSource: "estimated"},
	}
	if len(j.Agents) != len(want) {
		t.Fatalf("agents %+v, want %+v", j.Agents, want)
	}
	for i := range want {
		if j.Agents[i] != want[i] {
			t.Errorf("agent %d: %+v, want %+v", i, j.Agents[i], want[i])
		}
	}

	alone := explainDelegate(t, "", "")
	b.Reset()
	if err := alone.Write(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "Spend per agent") || len(alone.JSON().Agents) != 0 {
		t.Errorf("explain speaks of agents with the main agent alone:\n%s", b.String())
	}
}

// BUDGET.md says the task's sub-agent caps, after the spend per agent.
func TestBudgetMDSaysTheSubAgentCaps(t *testing.T) {
	r := subAgentReport(t, "", "general-purpose: part 1")
	eight, tokens := 8, int64(200000)
	r.Task.SubAgents = purser.SubAgentLimits{MaxSpawn: &eight, Each: purser.SubAgentCap{USD: usd("0.50"), Tokens: &tokens}}
	got := string(report.BudgetMD(r))
	want := "\nSub-agents (subAgents:): at most 8 spawned; each at most $0.50 and 200000 tokens. A spawn past the count"
	if !strings.Contains(got, want) || strings.Index(got, want) < strings.Index(got, "## Per sub-agent") {
		t.Errorf("BUDGET.md does not say the caps after the spend per agent:\n%s", got)
	}
}
