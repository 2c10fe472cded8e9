package report_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/report"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file; run go test ./report -update and review the diff.\ngot:\n%s", name, got)
	}
}

func usd(s string) *budget.USD {
	v, _ := budget.ParseUSD(s)
	return &v
}

// blockedReport is a task stopped by its money cap mid-call in iteration 3,
// after a retry, with degrade actions and one call of unknown cost.
func blockedReport(t *testing.T) report.Report {
	iters := 8
	cfg := budget.Config{Optimal: budget.Limits{USD: usd("0.5")}, Warning: budget.Limits{USD: usd("0.8")}, Hard: budget.HardLimits{USD: usd("1"), MaxIterations: &iters}}
	m, err := budget.NewManager(cfg, budget.Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	ev := func(call string, it int, kind purser.CallKind, model string, in, out int64, cost string, src budget.CostSource) purser.LedgerEntry {
		e := budget.UsageEvent{Model: model, InputTokens: in, OutputTokens: out, CostSource: src}
		if cost != "" {
			e.USD = *usd(cost)
		}
		switch src {
		case budget.CostEstimated:
			e.PriceSource = "built-in prices (LiteLLM @00035b69, read 2026-11-23) as " + model + " (standard, base rates)"
		case budget.CostUnknown:
			e.PriceSource = `no price for "` + model + `" in the catalogue`
		}
		m.RecordUsage(e)
		return purser.LedgerEntry{Key: call + "/1", CallID: call, Iteration: it, Kind: kind, Event: e, At: at}
	}
	end := func(it int) purser.LedgerEntry {
		m.RecordUsage(budget.UsageEvent{IterationEnd: true})
		return purser.LedgerEntry{Key: "end", Iteration: it, Event: budget.UsageEvent{IterationEnd: true}}
	}
	usage := []purser.LedgerEntry{
		ev("c1", 1, purser.CallPlanning, "claude-sonnet-4-5", 4000, 500, "0.0195", budget.CostEstimated),
		ev("c2", 1, purser.CallMain, "claude-sonnet-4-5", 20000, 3000, "0.40", budget.CostReported),
		ev("c3", 1, purser.CallMain, "claude-sonnet-4-5", 500, 0, "0.01", budget.CostReported),
		end(1),
		ev("c4", 2, purser.CallMain, "claude-haiku-4-5", 9000, 2000, "0.35", budget.CostReported),
		ev("c5", 2, purser.CallSelfReview, "local-llm", 3000, 300, "", budget.CostUnknown),
		end(2),
		ev("c6", 3, purser.CallMain, "claude-haiku-4-5", 9000, 1500, "0.25", budget.CostReported),
	}
	m.RecordUsage(budget.UsageEvent{IterationEnd: true})
	st := m.Status()
	return report.Report{
		Task: purser.Task{ID: "fix-commas", Goal: "Make the parser accept trailing commas.", Workspace: "/work/repo", File: "/work/fix-commas.yaml",
			Budget: cfg, Validators: []purser.Validator{{Name: "tests", Run: "go test ./..."}}},
		State:     purser.StateBlocked,
		InGitRepo: true,
		Cause:     &budget.BudgetExhaustedError{Scope: budget.ScopeTask, Metric: budget.Money, Status: st, Limit: int64(*cfg.Hard.USD)},
		Status:    st,
		Iterations: []purser.IterationRecord{
			{N: 1, Outcome: "failed", Validators: []purser.ValidatorResult{{Name: "tests", ExitCode: 1, Output: "--- FAIL: TestTrailingComma\n    parser_test.go:42: got error"}}},
			{N: 2, Outcome: "failed", Validators: []purser.ValidatorResult{{Name: "tests", ExitCode: 1, Output: "--- FAIL: TestTrailingComma (still)"}}},
			{N: 3, Outcome: "stopped"},
		},
		Calls: []purser.CallRecord{
			{ID: "c1", Iteration: 1, Kind: purser.CallPlanning, Attempt: 1, Model: "claude-sonnet-4-5", Outcome: purser.CallOK, Reserved: budget.Amount{Tokens: 12192, USD: *usd("0.135")}},
			{ID: "c2", Iteration: 1, Kind: purser.CallMain, Attempt: 1, Model: "claude-sonnet-4-5", Outcome: purser.CallStalled, Error: "stalled: no bytes from the agent for 2m0s: transient backend error", InnerRetries: 2, Reserved: budget.Amount{Tokens: 28192}},
			{ID: "c3", Iteration: 1, Kind: purser.CallMain, Attempt: 2, Model: "claude-sonnet-4-5", Outcome: purser.CallOK, Reserved: budget.Amount{Tokens: 28192}},
			{ID: "c4", Iteration: 2, Kind: purser.CallMain, Attempt: 1, Model: "claude-haiku-4-5", Outcome: purser.CallOK, Reserved: budget.Amount{Tokens: 9192}},
			{ID: "c5", Iteration: 2, Kind: purser.CallSelfReview, Attempt: 1, Model: "local-llm", Outcome: purser.CallOK, Reserved: budget.Amount{Tokens: 9192}},
			{ID: "c6", Iteration: 3, Kind: purser.CallMain, Attempt: 1, Model: "claude-haiku-4-5", Outcome: purser.CallCancelled, Error: "budget exhausted: task hard cap on money reached ($1.0295 used of $1.00)", Reserved: budget.Amount{Tokens: 9192}},
		},
		Usage:  callUsage(usage),
		Prices: priceSources(usage),
		Degrades: []purser.DegradeRecord{
			{Iteration: 2, Call: purser.CallMain, Action: purser.SwitchTierCheap, Tier: budget.Warning, Metric: budget.Money, Detail: "model tier standard → cheap", At: at.Add(time.Minute)},
			{Iteration: 2, Call: purser.CallMain, Action: purser.RepairOnlyMode, Tier: budget.Warning, Metric: budget.Money, Detail: "repair-only prompt", At: at.Add(time.Minute)},
		},
	}
}

func TestStatusMDGolden(t *testing.T) {
	golden(t, "blocked.STATUS.md", report.StatusMD(blockedReport(t)))
}
func TestBudgetMDGolden(t *testing.T) {
	golden(t, "blocked.BUDGET.md", report.BudgetMD(blockedReport(t)))
}

// A secret in the environment never reaches STATUS.md or BUDGET.md, even
// when a validator or an error echoes it.
func TestSecretsAreRedacted(t *testing.T) {
	const secret = "sk-planted-0123456789abcdef"
	t.Setenv("ACME_API_KEY", secret)
	r := blockedReport(t)
	r.Iterations[1].Validators[0].Output = "env dump: ACME_API_KEY=" + secret
	r.Calls[5].Error = "401 for key " + secret
	r.Cause = errors.New("backend said: bad key " + secret)
	for name, out := range map[string][]byte{"STATUS.md": report.StatusMD(r), "BUDGET.md": report.BudgetMD(r)} {
		if strings.Contains(string(out), secret) {
			t.Errorf("%s leaks the planted secret", name)
		}
		if !strings.Contains(string(out), "[REDACTED]") {
			t.Errorf("%s does not show the redaction", name)
		}
	}
}

// callUsage sums ledger entries per call and model, as a store's CallUsage
// does, in first-seen order.
func callUsage(entries []purser.LedgerEntry) []purser.CallUsage {
	var out []purser.CallUsage
	at := map[[3]string]int{}
	for _, e := range entries {
		if e.CallID == "" {
			continue
		}
		k := [3]string{e.CallID, e.Event.Model, e.Event.Agent}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, purser.CallUsage{CallID: e.CallID, Iteration: e.Iteration, Kind: e.Kind, Model: e.Event.Model, Agent: e.Event.Agent})
		}
		out[i].Totals.Add(e.Event)
		out[i].CachedTokens += e.Event.CacheReadTokens
	}
	return out
}

// priceSources sums ledger entries per price source and cost source, as a
// store's PriceSources does, in first-seen order.
func priceSources(entries []purser.LedgerEntry) []purser.PriceSourceUsage {
	var out []purser.PriceSourceUsage
	at := map[string]int{}
	for _, e := range entries {
		ev := e.Event
		if ev.PriceSource == "" {
			continue
		}
		k := ev.PriceSource + "\x00" + ev.CostSource.String()
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, purser.PriceSourceUsage{Source: ev.PriceSource, CostSource: ev.CostSource})
		}
		out[i].Events++
		out[i].Tokens += ev.Tokens()
		if ev.CostSource != budget.CostUnknown {
			out[i].USD += ev.USD
		}
	}
	return out
}

// subscriptionReport is a task DONE on a flat-rate plan: its dollars, one
// call's reported by the CLI and one's estimated from the built-in table,
// are list prices, shown apart from money spent (none).
func subscriptionReport(t *testing.T) report.Report {
	iters := 5
	tokens := int64(200_000)
	cfg := budget.Config{Hard: budget.HardLimits{Tokens: &tokens, MaxIterations: &iters}}
	m, err := budget.NewManager(cfg, budget.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const source = "built-in prices (LiteLLM @00035b69, read 2026-11-23) as claude-sonnet-4-5 (standard, base rates)"
	usage := []purser.LedgerEntry{
		{Key: "c1/1", CallID: "c1", Iteration: 1, Kind: purser.CallMain, Event: budget.UsageEvent{Model: "claude-sonnet-4-5", InputTokens: 20000, OutputTokens: 3000,
			USD: *usd("0.105"), CostSource: budget.CostList, PriceSource: source}},
		{Key: "c1/2", CallID: "c1", Iteration: 1, Kind: purser.CallMain, Event: budget.UsageEvent{Model: "claude-sonnet-4-5", USD: *usd("0.0125"), CostSource: budget.CostList}},
		{Key: "c2/1", CallID: "c2", Iteration: 2, Kind: purser.CallMain, Event: budget.UsageEvent{Model: "claude-sonnet-4-5", InputTokens: 9000, OutputTokens: 1000,
			USD: *usd("0.042"), CostSource: budget.CostList, PriceSource: source}},
	}
	for _, e := range usage {
		m.RecordUsage(e.Event)
	}
	m.RecordUsage(budget.UsageEvent{IterationEnd: true})
	m.RecordUsage(budget.UsageEvent{IterationEnd: true})
	return report.Report{
		Task: purser.Task{ID: "on-a-plan", Goal: "Make the parser accept trailing commas.", Workspace: "/work/repo", File: "/work/on-a-plan.yaml",
			Budget: cfg, Validators: []purser.Validator{{Name: "tests", Run: "go test ./..."}}},
		State:  purser.StateDone,
		Status: m.Status(),
		Iterations: []purser.IterationRecord{
			{N: 1, Outcome: "failed", Validators: []purser.ValidatorResult{{Name: "tests", ExitCode: 1, Output: "--- FAIL: TestTrailingComma"}}},
			{N: 2, Outcome: "passed", Validators: []purser.ValidatorResult{{Name: "tests", Passed: true}}},
		},
		Calls: []purser.CallRecord{
			{ID: "c1", Iteration: 1, Kind: purser.CallMain, Attempt: 1, Model: "claude-sonnet-4-5", Outcome: purser.CallOK, Reserved: budget.Amount{Tokens: 28192}},
			{ID: "c2", Iteration: 2, Kind: purser.CallMain, Attempt: 1, Model: "claude-sonnet-4-5", Outcome: purser.CallOK, Reserved: budget.Amount{Tokens: 17192}},
		},
		Usage:  callUsage(usage),
		Prices: priceSources(usage),
	}
}

// Issue 12 item 5: on a flat-rate plan, list dollars are shown as list,
// apart from money spent, in both files.
func TestSubscriptionGolden(t *testing.T) {
	r := subscriptionReport(t)
	golden(t, "subscription.BUDGET.md", report.BudgetMD(r))
	golden(t, "subscription.STATUS.md", report.StatusMD(r))
}

// Issue 10 #6: the manual steps fit the workspace: no git commands for a
// folder that is not a repository.
func TestManualStepsFitTheWorkspace(t *testing.T) {
	r := blockedReport(t)
	r.InGitRepo = false
	status := string(report.StatusMD(r))
	if strings.Contains(status, "git diff") || !strings.Contains(status, "not a git repository") {
		t.Fatalf("STATUS.md for a workspace outside git:\n%s", status)
	}
	r.InGitRepo = true
	if status := string(report.StatusMD(r)); !strings.Contains(status, "git status && git diff") {
		t.Fatalf("STATUS.md for a git workspace:\n%s", status)
	}
}
