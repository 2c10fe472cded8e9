package forecast_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/forecast"
)

func dollars(d float64) budget.USD { return budget.USD(math.Round(d * budget.NanosPerDollar)) }

// ladder is a history of runs ending at $1, $2, … $n; those ending at or
// under solvedUpTo were solved.
func ladder(n int, solvedUpTo float64) []forecast.Sample[budget.USD] {
	out := make([]forecast.Sample[budget.USD], n)
	for i := range out {
		solved := float64(n-i) <= solvedUpTo
		out[i] = forecast.Sample[budget.USD]{Final: dollars(float64(n - i)), Solved: &solved}
	}
	return out
}

func TestForecastReadsTheRunsThatGotThisFar(t *testing.T) {
	m := forecast.Fit(ladder(100, 50), forecast.Options{})
	for _, tc := range []struct {
		name              string
		spent             budget.USD
		low, median, high budget.USD
		reached           int
		pSolved           float64
	}{
		{"nothing spent: the whole history", 0, dollars(10), dollars(50), dollars(90), 100, 0.5},
		{"$60 spent: only runs that reached $60", dollars(60), dollars(64), dollars(80), dollars(96), 41, 0},
		{"$50.50 spent: runs from $51", dollars(50.5), dollars(55), dollars(75), dollars(95), 50, 0},
		{"$30 spent: 21 of the 71 runs that got there were solved", dollars(30), dollars(37), dollars(65), dollars(93), 71, 21.0 / 71},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := m.Forecast(tc.spent)
			if !f.OK {
				t.Fatalf("no forecast: %s", f.Why)
			}
			if f.Low != tc.low || f.Median != tc.median || f.High != tc.high || f.Reached != tc.reached {
				t.Errorf("got %s %s %s from %d runs, want %s %s %s from %d", f.Low, f.Median, f.High, f.Reached, tc.low, tc.median, tc.high, tc.reached)
			}
			if math.Abs(f.PSolved-tc.pSolved) > 1e-12 || f.Labelled != tc.reached {
				t.Errorf("P(solved) = %v of %d labelled, want %v of %d", f.PSolved, f.Labelled, tc.pSolved, tc.reached)
			}
			if f.Calibrated {
				t.Error("an uncorrected model says it is calibrated")
			}
		})
	}
}

func TestTooLittleHistoryForecastsNothing(t *testing.T) {
	m := forecast.Fit(ladder(100, 0), forecast.Options{MinReached: 20})
	f := m.Forecast(dollars(90))
	if f.OK || f.Median != 0 || f.High != 0 {
		t.Fatalf("forecast from 11 runs: %+v", f)
	}
	if !strings.Contains(f.Why, "11 of 100 past runs reached $90.00") {
		t.Errorf("Why = %q, want it to say how many runs got this far", f.Why)
	}
	if !strings.HasPrefix(f.String(), "no forecast: not enough history") {
		t.Errorf("String = %q", f.String())
	}
	if f := forecast.Fit[budget.USD](nil, forecast.Options{}).Forecast(0); f.OK {
		t.Errorf("an empty history forecast %+v", f)
	}
}

func TestForecastNeverBelowWhatIsSpent(t *testing.T) {
	m := forecast.Fit(ladder(100, 0), forecast.Options{MinReached: 1})
	// Shrink the interval hard: held-out runs all at the median.
	var held []forecast.Sample[budget.USD]
	for range 50 {
		held = append(held, forecast.Sample[budget.USD]{Final: dollars(50)})
	}
	m.Conformalize(held)
	for _, spent := range []budget.USD{0, dollars(20), dollars(99.5)} {
		f := m.Forecast(spent)
		if f.Low < spent || f.High < spent {
			t.Errorf("at %s: interval %s–%s below what is spent", spent, f.Low, f.High)
		}
	}
}

func TestCheckpointsAreADoublingGridOfWhatTheRunPassed(t *testing.T) {
	got := forecast.Checkpoints(dollars(0.05))
	want := []budget.USD{0, dollars(0.01), dollars(0.02), dollars(0.04)}
	if !slices.Equal(got, want) {
		t.Errorf("Checkpoints($0.05) = %v, want %v", got, want)
	}
	if got := forecast.Checkpoints(0); !slices.Equal(got, []budget.USD{0}) {
		t.Errorf("Checkpoints(0) = %v", got)
	}
}

// lognormal draws n runs whose final spend is lognormal around $1 with
// spread sigma; the cheaper half is solved more often.
func lognormal(r *rand.Rand, n int, sigma float64) []forecast.Sample[budget.USD] {
	out := make([]forecast.Sample[budget.USD], n)
	for i := range out {
		d := math.Exp(r.NormFloat64() * sigma)
		solved := r.Float64() < 1/(1+d)
		out[i] = forecast.Sample[budget.USD]{Final: dollars(d), Solved: &solved}
	}
	return out
}

func TestCalibratedIntervalsHoldTheirCoverageOnUnseenRuns(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for _, tc := range []struct {
		name           string
		fitSigma       float64 // the history the model reads
		heldSigma      float64 // the runs it is calibrated on and tested on
		rawMin, rawMax float64 // the uncorrected interval's coverage
	}{
		// The same population: read as is, the interval already holds
		// about 80 %; the correction must not spoil it.
		{"exchangeable runs", 1, 1, 0.76, 0.84},
		// Runs now vary more than the history did: read as is, the
		// interval covers too few; the correction restores it.
		{"runs more spread than their history", 0.6, 1.4, 0, 0.72},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fit := lognormal(r, 3000, tc.fitSigma)
			cal := lognormal(r, 1500, tc.heldSigma)
			test := lognormal(r, 3000, tc.heldSigma)
			m := forecast.Fit(fit, forecast.Options{})
			raw := m.Evaluate(test)
			if raw.Coverage < tc.rawMin || raw.Coverage > tc.rawMax {
				t.Fatalf("uncorrected coverage %.3f, want %.2f–%.2f (the scenario is not what it claims)", raw.Coverage, tc.rawMin, tc.rawMax)
			}
			if n := m.Conformalize(cal); n < 1500 {
				t.Fatalf("calibrated on %d checkpoints, want at least one per held-out run", n)
			}
			got := m.Evaluate(test)
			t.Logf("coverage %.3f uncorrected, %.3f calibrated; median error %.0f %%; Brier %.3f", raw.Coverage, got.Coverage, got.MedianRelError*100, got.Brier)
			if got.Coverage < 0.77 || got.Coverage > 0.83 {
				t.Errorf("calibrated coverage %.3f on unseen runs, want 0.77–0.83 (uncorrected %.3f)", got.Coverage, raw.Coverage)
			}
			if got.Checkpoints < len(test) {
				t.Errorf("%d forecasts scored for %d runs", got.Checkpoints, len(test))
			}
			if !m.Forecast(0).Calibrated {
				t.Error("a conformalized model does not say so")
			}
			// P(solved) carries information: better than a coin.
			if got.BrierN == 0 || got.Brier >= 0.25 {
				t.Errorf("Brier %.3f over %d, want under 0.25", got.Brier, got.BrierN)
			}
		})
	}
}

func TestForecastSaysItself(t *testing.T) {
	m := forecast.Fit(ladder(100, 50), forecast.Options{})
	m.Conformalize(ladder(100, 50))
	got := m.Forecast(dollars(30)).String()
	for _, want := range []string{"forecast to finish $65.00 (80 %: $", "of past runs that reached $30.00, 30 % were solved"} {
		if !strings.Contains(got, want) {
			t.Errorf("String = %q, want it to contain %q", got, want)
		}
	}
}
