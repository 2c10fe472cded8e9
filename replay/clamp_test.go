package replay_test

import (
	"math/rand/v2"
	"testing"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

// A run recorded with totals only whose total reaches the cap is stopped,
// and spends exactly the cap: the clamp is exact, never a nano-dollar short
// of the cap (which left $13 runs against a $1 cap "not stopped").
func TestTotalsOnlyRunReachingTheCapIsStopped(t *testing.T) {
	totals := []string{"13.123456789", "1.000000001", "1", "2.999999999", "987.654321"}
	caps := []string{"0.50", "1", "0.333333333", "2", "5"}
	for _, total := range totals {
		for _, c := range caps {
			tu := usd(total)
			r := replay.Run{InstanceID: "x", TotalCostUSD: &tu, TotalInputTokens: 7_777_777, TotalOutputTokens: 33_333, TotalCacheRead: 5_000_000}
			res, err := replay.ReplayRun(capAt(c, ""), pricing.Builtin(), r)
			if err != nil {
				t.Fatal(err)
			}
			reaches := tu >= usd(c)
			if res.Stopped != reaches {
				t.Errorf("total %s, cap %s: stopped %v, want %v", total, c, res.Stopped, reaches)
			}
			if reaches && (res.SpentUSD != usd(c) || res.SavedUSD != tu-usd(c)) {
				t.Errorf("total %s, cap %s: spent %s saved %s, want the cap and total − cap", total, c, res.SpentUSD, res.SavedUSD)
			}
		}
	}
	// A token cap binds the same way, exactly.
	tokens := int64(1_000_003)
	iterations := 100
	cfg := budget.Config{Hard: budget.HardLimits{Tokens: &tokens, MaxIterations: &iterations}}
	r := replay.Run{InstanceID: "y", TotalInputTokens: 9_999_991, TotalOutputTokens: 7, TotalCacheRead: 3}
	res, err := replay.ReplayRun(cfg, pricing.New(), r)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped || res.SpentTokens != tokens {
		t.Fatalf("token cap: stopped %v, spent %d tokens, want %d", res.Stopped, res.SpentTokens, tokens)
	}
}

// The number of runs stopped never rises as the cap rises: each run stopped
// under a cap is stopped under every smaller cap.
func TestStoppedNeverRisesWithTheCap(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 34))
	var runs []replay.Run
	for i := range 300 {
		r := replay.Run{InstanceID: string(rune('a' + i%26))}
		if rng.IntN(2) == 0 {
			tu := budget.USD(rng.Int64N(20_000_000_000))
			r.TotalCostUSD, r.TotalInputTokens, r.TotalOutputTokens = &tu, rng.Int64N(5_000_000), rng.Int64N(100_000)
		} else {
			for range 1 + rng.IntN(30) {
				cu := budget.USD(rng.Int64N(900_000_000))
				r.Calls = append(r.Calls, replay.Call{InputTokens: rng.Int64N(200_000), OutputTokens: rng.Int64N(5000), CostUSD: &cu})
			}
		}
		runs = append(runs, r)
	}
	var prev []bool
	prevCount := len(runs) + 1
	for c := budget.USD(10_000_000); c <= 12_000_000_000; c = c*3/2 + 1 {
		cp := c
		it := 1000
		rep, err := replay.Replay(budget.Config{Hard: budget.HardLimits{USD: &cp, MaxIterations: &it}}, pricing.Builtin(), runs)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Summary.Stopped > prevCount {
			t.Fatalf("cap %s stopped %d runs, more than the %d a smaller cap stopped", c, rep.Summary.Stopped, prevCount)
		}
		for i, r := range rep.Runs {
			if r.Stopped && prev != nil && !prev[i] {
				t.Fatalf("cap %s stopped run %d, which a smaller cap did not", c, i)
			}
		}
		prev = prev[:0]
		for _, r := range rep.Runs {
			prev = append(prev, r.Stopped)
		}
		prevCount = rep.Summary.Stopped
	}
}

// Runs whose dollars nobody knows are unknown in the summary, never $0.
func TestUnknownDollarsStayUnknown(t *testing.T) {
	runs := []replay.Run{
		{InstanceID: "u1", Model: "some-unpriced-model", TotalInputTokens: 1000, TotalOutputTokens: 10},
		{InstanceID: "u2", Model: "some-unpriced-model", Calls: []replay.Call{{InputTokens: 5, Model: "some-unpriced-model"}}},
	}
	rep, err := replay.Replay(capAt("1", ""), pricing.Builtin(), runs)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Summary.USDSource != budget.SourceUnknown || budget.FormatUSD(rep.Summary.RecordedUSD, rep.Summary.USDSource) != "unknown" {
		t.Fatalf("summary %+v", rep.Summary)
	}
	for _, r := range rep.Runs {
		if r.RecordedUSDSource != budget.SourceUnknown || r.Stopped {
			t.Fatalf("run %s: recorded %s (%s), stopped %v", r.InstanceID, r.RecordedUSD, r.RecordedUSDSource, r.Stopped)
		}
	}
}
