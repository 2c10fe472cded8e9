package replay_test

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

// A null total_cost_usd is unknown, never a reported $0: on a run with no
// tokens either (nothing for a price table to estimate), and in the summary
// (issue 22, item 7).
func TestNullCostIsUnknownNeverReportedZero(t *testing.T) {
	runs, err := replay.Parse("held-out.jsonl", strings.NewReader(
		`{"instance_id": "n1", "model": "claude-sonnet-4-5", "granularity": "per_run", "calls": [], "total_cost_usd": null, "total_input_tokens": null, "total_output_tokens": null}`+"\n"+
			`{"instance_id": "n2", "model": "x", "granularity": "per_call", "calls": [{"input_tokens": null, "output_tokens": null, "cost_usd": null}], "total_cost_usd": null}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replay.Replay(capAt("1", ""), pricing.Builtin(), runs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		if r.RecordedUSDSource != budget.SourceUnknown {
			t.Errorf("run %s: recorded %s (%s), want unknown", r.InstanceID, r.RecordedUSD, r.RecordedUSDSource)
		}
	}
	if rep.Summary.USDSource != budget.SourceUnknown {
		t.Errorf("summary: %s (%s), want unknown", rep.Summary.RecordedUSD, rep.Summary.USDSource)
	}
	// A recorded zero stays a reported zero.
	zero := budget.USD(0)
	rep, err = replay.Replay(capAt("1", ""), pricing.Builtin(), []replay.Run{{InstanceID: "z", TotalCostUSD: &zero}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Runs[0].RecordedUSDSource != budget.SourceReported {
		t.Errorf("a recorded $0: %s", rep.Runs[0].RecordedUSDSource)
	}
}

// The summary names the price table that priced the calls with no recorded
// cost, and names none when every cost was recorded (issue 22, item 7).
func TestSummaryNamesThePriceTable(t *testing.T) {
	cost := usd("0.30")
	priced := replay.Run{InstanceID: "priced", Model: "m", Calls: []replay.Call{{InputTokens: 100, OutputTokens: 10, CostUSD: &cost, Model: "m"}}}
	estimated := replay.Run{InstanceID: "estimated", Model: "claude-sonnet-4-5", Calls: []replay.Call{{InputTokens: 1000, OutputTokens: 10, Model: "claude-sonnet-4-5"}}}
	rep, err := replay.Replay(capAt("10", ""), pricing.Builtin(), []replay.Run{priced, estimated})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Summary.PriceTables) != 1 || !strings.Contains(rep.Summary.PriceTables[0], "built-in prices") ||
		!strings.Contains(rep.Summary.PricesLine(), pricing.BuiltinReadOn) {
		t.Errorf("price tables %q; line %q", rep.Summary.PriceTables, rep.Summary.PricesLine())
	}
	if g := rep.Groups[0]; len(g.PriceTables) != 0 || !strings.Contains(g.PricesLine(), "no price table") {
		t.Errorf("a group of recorded costs: %q, %q", g.PriceTables, g.PricesLine())
	}
}

// A per-call run whose calls carry no cost keeps the total its record gives:
// the calls are priced from the table only to share that total out (so a cap
// stops them where their costs would have), and the run says its per-call
// figures are estimated and which table shaped them (issue 22, item 7; the
// shared corpus's Portkey runs: $5.97 estimated against $5.49 recorded).
func TestRecordedTotalIsKeptWhenCallsCarryNoCost(t *testing.T) {
	total := usd("0.5886561")
	calls := []replay.Call{
		{InputTokens: 2345, CacheReadTokens: 2023, OutputTokens: 40, Model: "gemini-3-pro-preview"},
		{InputTokens: 12_000, CacheReadTokens: 10_000, OutputTokens: 400, Model: "gemini-3-pro-preview"},
		{InputTokens: 40_000, CacheReadTokens: 30_000, OutputTokens: 2000, Model: "gemini-3-pro-preview"},
	}
	run := replay.Run{InstanceID: "portkey", Model: "google/gemini-3-pro-preview", Calls: calls, TotalCostUSD: &total}
	res, err := replay.ReplayRun(capAt("10", ""), pricing.Builtin(), run)
	if err != nil {
		t.Fatal(err)
	}
	if res.RecordedUSD != total || res.SpentUSD != total || res.SavedUSD != 0 {
		t.Errorf("recorded %s, spent %s, saved %s; want the record's %s", res.RecordedUSD, res.SpentUSD, res.SavedUSD, total)
	}
	if res.RecordedUSDSource != budget.SourceEstimated || !strings.Contains(res.CostNote, "estimated") ||
		!strings.Contains(res.CostNote, "built-in prices") || !strings.Contains(res.CostNote, total.Decimal()) {
		t.Errorf("source %s, note %q", res.RecordedUSDSource, res.CostNote)
	}
	// The calls' shares follow their estimated costs: a cap between the
	// first two calls' shares and all three stops the run at call 3.
	capped, err := replay.ReplayRun(capAt("0.20", ""), pricing.Builtin(), run)
	if err != nil {
		t.Fatal(err)
	}
	if !capped.Stopped || capped.StoppedAtCall == nil || *capped.StoppedAtCall != 3 {
		t.Errorf("stopped %v at %v", capped.Stopped, capped.StoppedAtCall)
	}
}

// A record that says its calls went through OpenRouter (usage_route) prices
// its costless calls by OpenRouter's entries (issue 22, item 1).
func TestRecordedRouteChoosesTheEntry(t *testing.T) {
	file, err := pricing.ParseLiteLLM([]byte(`{
		"openrouter/qwen/qwen3-235b-a22b-thinking-2507": {"input_cost_per_token": 1.1e-07, "output_cost_per_token": 6e-07},
		"qwen3-235b-a22b-thinking-2507": {"input_cost_per_token": 0.01, "output_cost_per_token": 0.01}
	}`), "routes.json")
	if err != nil {
		t.Fatal(err)
	}
	runs, err := replay.Parse("r.jsonl", strings.NewReader(
		`{"instance_id": "r", "model": "qwen3-235b-a22b-thinking-2507", "usage_route": "openrouter", "calls": [{"input_tokens": 10000, "output_tokens": 1000, "cost_usd": null}]}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := replay.ReplayRun(capAt("10", ""), file, runs[0])
	if err != nil {
		t.Fatal(err)
	}
	if res.RecordedUSD != usd("0.0017") || res.RecordedUSDSource != budget.SourceEstimated {
		t.Errorf("recorded %s (%s), want $0.0017 estimated from the OpenRouter entry", res.RecordedUSD, res.RecordedUSDSource)
	}
}
