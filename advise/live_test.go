package advise_test

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser/advise"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

// The live forecaster reads only finished runs of the task's model, and
// says its figures to the cent.
func TestLiveForecasterUsesFinishedRunsOfTheModel(t *testing.T) {
	yes, no := true, false
	var runs []replay.Run
	for k := 1; k <= 60; k++ {
		cost := budget.Dollars(int64(k)) / 10 // $0.10 … $6.00
		solved := &no
		if k%3 == 0 {
			solved = &yes
		}
		runs = append(runs, replay.Run{InstanceID: "a", Model: "m", Resolved: solved, TotalCostUSD: &cost})
		// Another model's runs, and runs still going, all far dearer: read,
		// they would pull the forecast up.
		dear := budget.Dollars(100)
		runs = append(runs, replay.Run{InstanceID: "b", Model: "other", Resolved: &no, TotalCostUSD: &dear},
			replay.Run{InstanceID: "c", Model: "m", TotalCostUSD: &dear})
	}
	fc := advise.LiveForecaster(pricing.Builtin(), runs, "m", "history", false)
	if !strings.Contains(fc.Source, "history: 60 finished runs of m") {
		t.Errorf("source %q", fc.Source)
	}
	f := fc.ForecastSpend(budget.Dollars(1))
	if !f.OK || f.High > budget.Dollars(7) || f.Median < budget.Dollars(2) || f.Median > budget.Dollars(5) {
		t.Fatalf("forecast %+v: want one from the $0.10–$6.00 runs alone", f)
	}
	const cent = budget.NanosPerDollar / 100
	for _, a := range []budget.USD{f.Median, f.Low, f.High} {
		if a%cent != 0 {
			t.Errorf("%s is not whole cents", a)
		}
	}
	if f.Low < f.Spent || f.Labelled == 0 || f.PSolved <= 0.2 || f.PSolved >= 0.5 {
		t.Errorf("forecast %+v: low under spent, or P(solved) not about a third", f)
	}
	// None of the model, not pooled: nothing to forecast from, said so.
	if g := advise.LiveForecaster(pricing.Builtin(), runs, "unknown", "history", false).ForecastSpend(0); g.OK || !strings.Contains(g.Why, "not enough history") {
		t.Errorf("no runs of the model: %+v", g)
	}
}
