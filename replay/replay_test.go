package replay_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

func load(t *testing.T) []replay.Run {
	t.Helper()
	runs, err := replay.ParseFile("testdata/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

func capAt(s string, optimal string) budget.Config {
	hard, _ := budget.ParseUSD(s)
	it := 100
	cfg := budget.Config{Hard: budget.HardLimits{USD: &hard, MaxIterations: &it}}
	if optimal != "" {
		o, _ := budget.ParseUSD(optimal)
		cfg.Optimal.USD = &o
	}
	return cfg
}

func usd(s string) budget.USD {
	v, _ := budget.ParseUSD(s)
	return v
}

// The answers below were worked out by hand for a $1.00 hard cap and a
// $0.50 optimal line:
//
//	a: 0.30 0.30 0.30 = 0.90, solved. Never stopped. WARNING after call 2 (0.60).
//	b: 0.40 0.40 0.40 = 1.20. Call 3 would make 1.20 > 1.00: refused. Spent 0.80,
//	   saved 0.40, WARNING after call 2 (0.80), stopped at call 3. Unsolved.
//	c: 0.20 0.30 = 0.50, solved. WARNING after call 2 (0.50, the optimal line
//	   itself). Not stopped.
//	d: 0.50 0.50 = 1.00 exactly, solved. WARNING after call 1, HARD after call 2,
//	   its last: stopped (spend reached the cap) but nothing cut.
//	e: totals only, 2.50 > 1.00: clamped to the cap — spent 1.00, saved 1.50 (a
//	   lower bound: admission stops at or below the cap), stopped at call 1, a
//	   solved run cut.
//	f: totals only, 0.40, no label: not stopped.
//
// Summary: 6 runs, 3 stopped (b, d, e), 1 solved run cut (e), recorded 6.50,
// spent 4.60, saved 1.90. The naive rule spends a 0.90, b 1.20, c 0.50, d 1.00,
// e 2.50, f 0.40: over the cap by 0.20 (b) + 1.50 (e) = 1.70.
func TestReplayWorkedByHand(t *testing.T) {
	rep, err := replay.Replay(capAt("1.00", "0.50"), pricing.Builtin(), load(t))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		warning, stopped *int
		spent, saved     string
		isStopped, cut   bool
		upper            bool
	}
	n := func(i int) *int { return &i }
	wants := map[string]want{
		"a": {warning: n(2), spent: "0.90", saved: "0"},
		"b": {warning: n(2), stopped: n(3), spent: "0.80", saved: "0.40", isStopped: true},
		"c": {warning: n(2), spent: "0.50", saved: "0"},
		"d": {warning: n(1), stopped: n(2), spent: "1.00", saved: "0", isStopped: true},
		"e": {warning: n(1), stopped: n(1), spent: "1.00", saved: "1.50", isStopped: true, cut: true, upper: true},
		"f": {spent: "0.40", saved: "0", upper: true},
	}
	eq := func(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	for _, r := range rep.Runs {
		w := wants[r.InstanceID]
		if !eq(r.WarningAtCall, w.warning) || !eq(r.StoppedAtCall, w.stopped) || r.SpentUSD != usd(w.spent) || r.SavedUSD != usd(w.saved) ||
			r.Stopped != w.isStopped || r.SolvedCut != w.cut || r.TotalsOnly != w.upper {
			t.Errorf("run %s = warning %v stopped %v spent %s saved %s stopped %v cut %v upper %v; want %+v",
				r.InstanceID, deref(r.WarningAtCall), deref(r.StoppedAtCall), r.SpentUSD, r.SavedUSD, r.Stopped, r.SolvedCut, r.TotalsOnly, w)
		}
		if r.SpentUSD > usd("1.00") {
			t.Errorf("run %s spent %s, past the hard cap", r.InstanceID, r.SpentUSD)
		}
	}
	s := rep.Summary
	if s.Runs != 6 || s.Stopped != 3 || s.SolvedCut != 1 || s.RecordedUSD != usd("6.50") || s.SpentUSD != usd("4.60") || s.SavedUSD != usd("1.90") ||
		s.NaiveOvershootUSD != usd("1.70") || s.TotalsOnly != 2 {
		t.Fatalf("summary = %+v", s)
	}
	if len(rep.Groups) != 2 || rep.Groups[0].System != "agent" || rep.Groups[0].Stopped != 2 || rep.Groups[1].SavedUSD != usd("1.50") {
		t.Fatalf("groups = %+v", rep.Groups)
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// A tokens cap stops runs by tokens, even where no cost is known.
func TestReplayTokensCap(t *testing.T) {
	it, tok := 100, int64(250)
	cfg := budget.Config{Hard: budget.HardLimits{Tokens: &tok, MaxIterations: &it}}
	rep, err := replay.Replay(cfg, pricing.New(), load(t)[:2])
	if err != nil {
		t.Fatal(err)
	}
	// a: 110 + 110 = 220, the third (330) does not fit. b: 220 fits, the second (440) does not.
	if a, b := rep.Runs[0], rep.Runs[1]; deref(a.StoppedAtCall) != 3 || a.SpentTokens != 220 || deref(b.StoppedAtCall) != 2 || b.SpentTokens != 220 {
		t.Fatalf("a stopped at %v with %d tokens; b at %v with %d", deref(a.StoppedAtCall), a.SpentTokens, deref(b.StoppedAtCall), b.SpentTokens)
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	for in, want := range map[string]string{
		"{\"instance_id\": \"a\"}\nnot json\n":              "c.jsonl:2: not a run record",
		`{"system": "x"}`:                                   "c.jsonl:1: instance_id: is required",
		`{"instance_id": "a", "calls": [{"cost_usd": -1}]}`: "c.jsonl:1: calls[0].cost_usd: want a non-negative number",
		`{"instance_id": "a", "total_cost_usd": "lots"}`:    "c.jsonl:1: not a run record",
	} {
		if _, err := replay.Parse("c.jsonl", strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", in, err, want)
		}
	}
}

// The shared corpus, when it is beside the repository: the figures its
// README derives for the naive rule are reproduced, and admission never
// spends past the cap.
func TestSharedCorpus(t *testing.T) {
	runs, err := replay.ParseFile("../../shared/replay/replay.jsonl")
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("shared corpus not beside the repository:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1960 {
		t.Fatalf("%d runs, want 1960", len(runs))
	}
	var openrouter []replay.Run
	for _, r := range runs {
		if len(r.Calls) > 0 && r.Calls[0].CostUSD != nil {
			openrouter = append(openrouter, r)
		}
	}
	rep, err := replay.Replay(capAt("1.00", ""), pricing.Builtin(), openrouter)
	if err != nil {
		t.Fatal(err)
	}
	// README: the naive rule at $1.00 on the 484 runs with per-call cost
	// stops 24 runs, cuts 12 solved and saves $14.01.
	naiveStopped, naiveSaved := 0, budget.USD(0)
	for _, r := range rep.Runs {
		if r.NaiveSpentUSD < r.RecordedUSD {
			naiveStopped++
			naiveSaved += r.RecordedUSD - r.NaiveSpentUSD
		}
		if r.SpentUSD > usd("1.00") {
			t.Fatalf("run %s spent %s under a $1.00 cap", r.InstanceID, r.SpentUSD)
		}
	}
	if len(openrouter) != 484 || naiveStopped != 24 || naiveSaved.Float() < 14.005 || naiveSaved.Float() >= 14.015 {
		t.Fatalf("%d runs; naive: %d stopped, %s saved; want 484, 24, $14.01", len(openrouter), naiveStopped, naiveSaved)
	}
	if rep.Summary.Stopped != 25 || rep.Summary.SolvedCut != 12 {
		t.Fatalf("admission: %d stopped, %d solved cut; want 25, 12", rep.Summary.Stopped, rep.Summary.SolvedCut)
	}
}

// A summary says where its dollar figures came from, over every call of
// every run: a run whose calls have no cost and no price makes the total a
// lower bound (partial), and a corpus of such runs is unknown, never $0.
func TestSummaryUSDSource(t *testing.T) {
	cost := usd("0.30")
	priced := replay.Run{InstanceID: "priced", Calls: []replay.Call{{InputTokens: 100, OutputTokens: 10, CostUSD: &cost}}}
	estimated := replay.Run{InstanceID: "estimated", Calls: []replay.Call{{InputTokens: 1000, OutputTokens: 10, Model: "claude-sonnet-4-5"}}}
	unpriced := replay.Run{InstanceID: "unpriced", Calls: []replay.Call{{InputTokens: 100, OutputTokens: 10, Model: "no-such-model"}}}
	tests := []struct {
		name string
		runs []replay.Run
		want budget.USDSource
	}{
		{"all reported", []replay.Run{priced}, budget.SourceReported},
		{"some estimated", []replay.Run{priced, estimated}, budget.SourceEstimated},
		{"some unknown", []replay.Run{priced, estimated, unpriced}, budget.SourcePartial},
		{"all unknown", []replay.Run{unpriced}, budget.SourceUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := replay.Replay(capAt("10", ""), pricing.Builtin(), tt.runs)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Summary.USDSource != tt.want || rep.Groups[0].USDSource != tt.want {
				t.Fatalf("summary %s, group %s; want %s", rep.Summary.USDSource, rep.Groups[0].USDSource, tt.want)
			}
		})
	}
}
