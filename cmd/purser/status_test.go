package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/sqlite"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// Issue 12 item 2: `purser status --json` says which price table and rates
// priced a task's estimates (the built-in table with its date, a file with
// its SHA-256, the tier of rates), or why a model had no price, summed per
// source; and list dollars (a flat-rate plan) apart from money spent.
func TestStatusJSONShowsPriceProvenance(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "p.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	iters := 5
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.SaveTask(ctx, purser.TaskRecord{ID: "t", Workspace: "/work/ws", State: purser.StateDone,
		Budget: budget.Config{Hard: budget.HardLimits{MaxIterations: &iters}}}))
	const (
		builtin = "built-in prices (LiteLLM @00035b69, read 2026-11-23) as claude-sonnet-4-5 (standard, base rates)"
		long    = "built-in prices (LiteLLM @00035b69, read 2026-11-23) as claude-sonnet-4-5 (standard, input above 200,000 tokens)"
		file    = "file /work/prices.json sha256:9f2c1d0e as gpt-5.5 (priority, base rates)"
		none    = `no price for "mystery-1" in the catalogue`
	)
	ev := func(key string, cost budget.CostSource, source string, in, out int64, usd budget.USD) purser.LedgerEntry {
		return purser.LedgerEntry{Key: key, TaskID: "t", CallID: "c-" + key, Kind: purser.CallMain,
			Event: budget.UsageEvent{InputTokens: in, OutputTokens: out, USD: usd, CostSource: cost, PriceSource: source}}
	}
	must(s.AppendUsage(ctx,
		ev("1", budget.CostEstimated, builtin, 20_000, 1_000, 75_000_000),
		ev("2", budget.CostEstimated, long, 300_000, 10_000, 2_025_000_000),
		ev("3", budget.CostReported, "", 100, 10, 1_000_000),
		ev("4", budget.CostEstimated, builtin, 1_000, 100, 4_500_000),
		ev("5", budget.CostEstimated, file, 1_000, 100, 5_000_000),
		ev("6", budget.CostUnknown, none, 500, 50, 0),
		ev("7", budget.CostList, builtin, 2_000, 200, 9_000_000),
	))
	must(s.Close())

	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"status", "t", "--json", "--db", path}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var got struct {
		Tasks []struct {
			Budget struct {
				UsedUSD   json.RawMessage `json:"usedUsd"`
				ListUSD   json.RawMessage `json:"listUsd"`
				USDSource string          `json:"usdSource"`
			} `json:"budget"`
			Prices json.RawMessage `json:"prices"`
		} `json:"tasks"`
	}
	must(json.Unmarshal(stdout.Bytes(), &got))
	if len(got.Tasks) != 1 {
		t.Fatalf("%d tasks in %s", len(got.Tasks), stdout.String())
	}
	b := got.Tasks[0].Budget
	if string(b.UsedUSD) != "2.1105" || string(b.ListUSD) != "0.009" || b.USDSource != "partial" {
		t.Fatalf("budget: used %s, list %s, source %s; want 2.1105 spent, 0.009 at list apart, partial", b.UsedUSD, b.ListUSD, b.USDSource)
	}
	var prices bytes.Buffer
	must(json.Indent(&prices, got.Tasks[0].Prices, "", "  "))
	prices.WriteByte('\n')
	golden := filepath.Join("testdata", "status-prices.golden.json")
	if *update {
		must(os.WriteFile(golden, prices.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/purser -run TestStatusJSONShowsPriceProvenance -update writes it)", err)
	}
	if prices.String() != string(want) {
		t.Errorf("the prices of status --json differ from %s:\n%s", golden, prices.String())
	}
}
