package forecast_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/forecast"
)

// periods draws n periods of size runs each: within a period runs are
// lognormal with spread 0.5 around a level of the period's own (spread
// 0.6 across periods), as runs of one repository are alike and cost
// differently from another's.
func periods(r *rand.Rand, n, size int) [][]forecast.Sample[budget.USD] {
	out := make([][]forecast.Sample[budget.USD], n)
	for i := range out {
		level := r.NormFloat64() * 0.6
		for range size {
			d := math.Exp(level + r.NormFloat64()*0.5)
			solved := r.Float64() < 0.5
			out[i] = append(out[i], forecast.Sample[budget.USD]{Final: dollars(d), Solved: &solved})
		}
	}
	return out
}

func TestCrossConformalHoldsItsCoverageOnAPeriodItNeverSaw(t *testing.T) {
	// Many replications of: a history of five periods, the forecast
	// tested on the next period. Coverage averages over them (one
	// replication's figure swings with the new period's level).
	r := rand.New(rand.NewPCG(3, 5))
	var cross, naive forecast.Score[budget.USD]
	for range 300 {
		history := periods(r, 5, 40)
		test := periods(r, 1, 40)[0]
		m := forecast.FitCross(history, forecast.Options{})
		add(&cross, m.Evaluate(test))
		if m.Runs() != 200 || !m.Forecast(0).Calibrated {
			t.Fatalf("fitted on %d runs, calibrated %v: want all 200 runs read and a correction", m.Runs(), m.Forecast(0).Calibrated)
		}
		// The correction read from runs dealt alternately from the same
		// periods sees no shift between periods.
		var fit, held []forecast.Sample[budget.USD]
		for _, p := range history {
			for i, s := range p {
				if i%2 == 0 {
					fit = append(fit, s)
				} else {
					held = append(held, s)
				}
			}
		}
		split := forecast.Fit(fit, forecast.Options{})
		split.Conformalize(held)
		add(&naive, split.Evaluate(test))
	}
	c, n := float64(cross.Covered)/float64(cross.Checkpoints), float64(naive.Covered)/float64(naive.Checkpoints)
	t.Logf("coverage on a new period: cross-conformal by period %.3f, alternate split %.3f", c, n)
	if c < 0.77 || c > 0.85 {
		t.Errorf("cross-conformal coverage %.3f on periods it never saw, want 0.77–0.85", c)
	}
	if n >= c-0.03 {
		t.Errorf("the scenario shows no shift: alternate split covers %.3f, cross-conformal %.3f", n, c)
	}
}

func add(total *forecast.Score[budget.USD], s forecast.Score[budget.USD]) {
	total.Covered += s.Covered
	total.Checkpoints += s.Checkpoints
}

func TestCrossConformalWithOneFoldIsUncorrected(t *testing.T) {
	m := forecast.FitCross([][]forecast.Sample[budget.USD]{ladder(100, 50)}, forecast.Options{})
	if m.Calibrated() != 0 || m.Forecast(0).Calibrated {
		t.Errorf("one fold has nothing held out, yet the model says it was corrected on %d scores", m.Calibrated())
	}
	if f := m.Forecast(0); !f.OK || f.Median != dollars(50) {
		t.Errorf("forecast %+v, want the plain fit's median $50", f)
	}
}
