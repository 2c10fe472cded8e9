package advise_test

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser/advise"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

// runOf is a run of n calls of $0.10 each.
func runOf(n int, solved bool) replay.Run {
	r := replay.Run{System: "s", Model: "m", Resolved: &solved}
	for range n {
		c := budget.Dollars(1) / 10
		r.Calls = append(r.Calls, replay.Call{InputTokens: 10, CostUSD: &c, Model: "m"})
	}
	return r
}

// Half the runs make 10 calls ($1.00, unsolved), half 2 ($0.20, solved),
// in turn. At a $0.50 cap the forecast's upper bound ($1.00) passes the cap
// before anything is spent: every run that reached the cap is warned with
// all $0.50 left, and every run that ended under it is a false alarm. The
// plain line at $0.15 warns the long runs at $0.20 ($0.30 left) and never
// the short ones.
func TestCompareTriggerKnownAnswer(t *testing.T) {
	// Pairs of one kind, so that both the fitted (even) and the scored
	// (odd) runs hold both kinds.
	var runs []replay.Run
	for i := range 200 {
		runs = append(runs, runOf(10-8*((i/2)%2), (i/2)%2 == 1))
	}
	tc := advise.CompareTrigger(pricing.Builtin(), runs, budget.Dollars(1)/2, budget.Dollars(15)/100)
	if tc.Why != "" || tc.Runs != 100 {
		t.Fatalf("comparison %+v", tc)
	}
	f, p := tc.Forecast, tc.Plain
	if f.Reached != 50 || f.Under != 50 || f.Warned != 50 || f.Left != budget.Dollars(1)/2 || f.FalseAlarms != 50 || f.SolvedAlarms != 50 {
		t.Errorf("forecast trigger %+v", f)
	}
	if p.Warned != 50 || p.Left != budget.Dollars(3)/10 || p.FalseAlarms != 0 {
		t.Errorf("plain line %+v", p)
	}
	o := advise.FinishCallOvershoot(pricing.Builtin(), runs, "m")
	if o.Calls != 1200 || o.Median != budget.Dollars(1)/10 || o.Max != budget.Dollars(1)/10 {
		t.Errorf("overshoot %+v", o)
	}
	var b strings.Builder
	if err := advise.WriteTrigger(&b, tc, o); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"warned 50 of 50 runs that reached the cap, a median $0.50 left", "warned 50 of 50 that ended under it (50 of them solved)",
		"one call spent $0.10 (median)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	// Totals only: nothing to warn from, said so.
	total := budget.Dollars(1)
	tot := []replay.Run{{System: "s", Model: "m", TotalCostUSD: &total}}
	if tc := advise.CompareTrigger(pricing.Builtin(), append(tot, tot...), total, total/2); !strings.Contains(tc.Why, "totals only") {
		t.Errorf("totals only: %+v", tc)
	}
}
