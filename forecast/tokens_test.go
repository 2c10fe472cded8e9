package forecast_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/purser-dev/purser/forecast"
)

// tokenLadder is a history of runs ending at 100k, 200k, … n×100k tokens;
// the cheaper half was solved.
func tokenLadder(n int) []forecast.Sample[int64] {
	out := make([]forecast.Sample[int64], n)
	for i := range out {
		solved := i < n/2
		out[i] = forecast.Sample[int64]{Final: int64(i+1) * 100_000, Solved: &solved}
	}
	return out
}

// Tokens are forecast as money is: the runs that used at least as many
// tokens, their median and 80 % interval, and P(solved) among them.
func TestTokensForecastReadsTheRunsThatGotThisFar(t *testing.T) {
	m := forecast.Fit(tokenLadder(100), forecast.Options{Unit: forecast.TokensUnit})
	f := m.Forecast(3_000_000) // runs of 3.0M … 10.0M tokens: 71 of them
	if !f.OK || f.Reached != 71 {
		t.Fatalf("forecast %+v: want one from the 71 runs that reached 3.0M", f)
	}
	if f.Low != 3_700_000 || f.Median != 6_500_000 || f.High != 9_300_000 {
		t.Errorf("got %d %d %d, want 3.7M 6.5M 9.3M", f.Low, f.Median, f.High)
	}
	if want := 21.0 / 71; math.Abs(f.PSolved-want) > 1e-12 {
		t.Errorf("P(solved) = %v, want %v (runs of 3.0M–5.0M solved)", f.PSolved, want)
	}
	got := f.String()
	for _, want := range []string{"forecast to finish 6.50M tokens (80 %: 3.70M–9.30M)", "of past runs that reached 3.00M tokens, 30 % were solved"} {
		if !strings.Contains(got, want) {
			t.Errorf("String = %q, want it to contain %q", got, want)
		}
	}
	if no := m.Forecast(9_000_000); no.OK || !strings.Contains(no.Why, "9000000 tokens") {
		t.Errorf("beyond the history: %+v, want none, saying the tokens", no)
	}
	// The grid a tokens model is calibrated and scored on starts at 10k.
	if got, want := forecast.Grid(forecast.TokensUnit, int64(50_000)), []int64{0, 10_000, 20_000, 40_000}; !slices.Equal(got, want) {
		t.Errorf("Grid(tokens, 50k) = %v, want %v", got, want)
	}
}

// A calibrated tokens forecast holds its coverage on unseen runs that
// vary more than its history (the correction is on the tokens' own scale).
func TestTokensIntervalsCalibrated(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	draw := func(n int, sigma float64) []forecast.Sample[int64] {
		out := make([]forecast.Sample[int64], n)
		for i := range out {
			out[i] = forecast.Sample[int64]{Final: int64(500_000 * math.Exp(r.NormFloat64()*sigma))}
		}
		return out
	}
	m := forecast.Fit(draw(3000, 0.6), forecast.Options{Unit: forecast.TokensUnit})
	test := draw(3000, 1.4)
	if raw := m.Evaluate(test); raw.Coverage > 0.72 {
		t.Fatalf("uncorrected coverage %.3f: the scenario does not under-cover", raw.Coverage)
	}
	m.Conformalize(draw(1500, 1.4))
	if got := m.Evaluate(test); got.Coverage < 0.77 || got.Coverage > 0.83 {
		t.Errorf("calibrated coverage %.3f, want 0.77–0.83", got.Coverage)
	}
}

// The adaptive forecast meets a shift its history cannot foresee — runs
// that suddenly cost four times as much — and, learning from each run once
// it has ended, covers far more of them than the fixed forecast, near the
// goal; on runs like its history it keeps the goal.
func TestOnlineAdaptsToAShift(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 2))
	draw := func(n int, level float64) []forecast.Sample[int64] {
		out := make([]forecast.Sample[int64], n)
		for i := range out {
			out[i] = forecast.Sample[int64]{Final: int64(level * math.Exp(r.NormFloat64()*0.5))}
		}
		return out
	}
	folds := make([][]forecast.Sample[int64], 10)
	for i := range folds {
		folds[i] = draw(40, 500_000)
	}
	opts := forecast.Options{Unit: forecast.TokensUnit}
	for _, tc := range []struct {
		name                 string
		level                float64
		fixedMax             float64
		onlineLow, onlineTop float64
	}{
		{"runs like the history", 500_000, 1, 0.76, 0.84},
		{"runs four times as costly", 2_000_000, 0.5, 0.74, 0.86},
	} {
		t.Run(tc.name, func(t *testing.T) {
			test := draw(600, tc.level)
			fixed := forecast.FitCross(folds, opts).Evaluate(test)
			o := forecast.NewOnline(folds, opts, 0)
			online := o.EvaluateOnline(test)
			t.Logf("coverage fixed %.3f, adaptive %.3f (level now %.3f)", fixed.Coverage, online.Coverage, o.Level())
			if fixed.Coverage > tc.fixedMax {
				t.Fatalf("fixed coverage %.3f: the scenario is not what it claims", fixed.Coverage)
			}
			if online.Coverage < tc.onlineLow || online.Coverage > tc.onlineTop {
				t.Errorf("adaptive coverage %.3f, want %.2f–%.2f (fixed %.3f)", online.Coverage, tc.onlineLow, tc.onlineTop, fixed.Coverage)
			}
			if o.Model().Runs() != 400+len(test) {
				t.Errorf("the adaptive model reads %d runs, want every run seen (%d)", o.Model().Runs(), 400+len(test))
			}
		})
	}
}

// A run is forecast before anything of it is learnt: observing it changes
// the forecasts after it, never those made for it.
func TestOnlineForecastsARunBeforeLearningIt(t *testing.T) {
	folds := [][]forecast.Sample[int64]{tokenLadder(50), tokenLadder(50)}
	opts := forecast.Options{Unit: forecast.TokensUnit}
	a, b := forecast.NewOnline(folds, opts, 0), forecast.NewOnline(folds, opts, 0)
	before := a.Model().Forecast(0)
	huge := forecast.Sample[int64]{Final: 900_000_000}
	if got := a.EvaluateOnline([]forecast.Sample[int64]{huge}); got.Covered != 0 {
		t.Fatalf("a run 90× the history's largest was covered: %+v", got)
	}
	if b.Model().Forecast(0) != before {
		t.Fatal("two fresh adaptive forecasts differ")
	}
	if after := a.Model().Forecast(0); after.High <= before.High || a.Level() <= b.Level() {
		t.Errorf("after a miss the interval is %d–%d at level %.4f, want it wider than %d–%d at %.4f", after.Low, after.High, a.Level(), before.Low, before.High, b.Level())
	}
}

// The forecast fitted on a history as it would stand after watching it
// (FitAdaptive) holds the goal on new runs like the history's. Just after
// watching a shift (the later half four times as costly) it errs wide on
// new runs of the later kind (about 0.94 here; FitCross about 0.8): the
// misses it saw lowered the miss rate it reads at, and only the hits of
// runs after them raise it again — a live forecast, refitted as each run
// ends, meets those; over the runs after the shift it is at the goal
// (TestOnlineAdaptsToAShift). It never errs narrow for it.
func TestFitAdaptiveHoldsTheGoalAfterAShift(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	draw := func(n int, level float64) []forecast.Sample[int64] {
		out := make([]forecast.Sample[int64], n)
		for i := range out {
			out[i] = forecast.Sample[int64]{Final: int64(level * math.Exp(r.NormFloat64()*0.5))}
		}
		return out
	}
	opts := forecast.Options{Unit: forecast.TokensUnit}
	for _, tc := range []struct {
		name     string
		later    float64
		low, top float64
	}{
		{"no shift", 500_000, 0.76, 0.86},
		{"the later half four times as costly", 2_000_000, 0.78, 0.96},
	} {
		t.Run(tc.name, func(t *testing.T) {
			folds := make([][]forecast.Sample[int64], 10)
			for i := range folds {
				folds[i] = draw(30, map[bool]float64{true: 500_000, false: tc.later}[i < 5])
			}
			got := forecast.FitAdaptive(folds, opts).Evaluate(draw(2000, tc.later))
			t.Logf("coverage %.3f", got.Coverage)
			if got.Coverage < tc.low || got.Coverage > tc.top {
				t.Errorf("coverage %.3f on new runs, want %.2f–%.2f", got.Coverage, tc.low, tc.top)
			}
		})
	}
	if few := forecast.FitAdaptive([][]forecast.Sample[int64]{draw(30, 1e5), draw(30, 1e5), draw(30, 1e5)}, opts); few.Runs() != 90 || few.Calibrated() == 0 {
		t.Errorf("with 3 folds: %d runs read, calibrated on %d; want all 90, cross-conformal", few.Runs(), few.Calibrated())
	}
}
