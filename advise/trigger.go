package advise

import (
	"fmt"
	"io"
	"sort"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/forecast"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

// WarningScore is how one WARNING trigger would have fared on a group's
// runs against a hard money cap: what it warned of, how early, and how
// often for nothing. What the degrade policy would then have saved cannot
// be replayed (a degraded run is a different run); the money left when the
// warning came is what it had to work with.
type WarningScore struct {
	// Reached is how many runs spent the cap (the plain cap stops them);
	// Warned how many of those were warned before the call that reached
	// it; Left the median money left under the cap when they were.
	Reached int        `json:"reached"`
	Warned  int        `json:"warned"`
	Left    budget.USD `json:"leftUsd"`
	// Under is how many runs ended under the cap; FalseAlarms how many of
	// them were warned all the same (their calls degraded for nothing),
	// SolvedAlarms how many of those were solved.
	Under        int `json:"under"`
	FalseAlarms  int `json:"falseAlarms"`
	SolvedAlarms int `json:"solvedAlarms"`
}

// TriggerComparison sets the forecast trigger (warning.forecast: hard)
// beside the plain WARNING line (the proposed optimal) on the same runs
// and the same hard cap.
type TriggerComparison struct {
	Cap  budget.USD `json:"capUsd"`
	Line budget.USD `json:"lineUsd"`
	// Runs is how many runs were scored: every other run, the forecast
	// fitted on the rest (FitRuns of them, which also correct its
	// intervals: cross-conformal, FitForecast).
	Runs     int          `json:"runs"`
	FitRuns  int          `json:"fitRuns"`
	Forecast WarningScore `json:"forecast"`
	Plain    WarningScore `json:"plain"`
	Why      string       `json:"why,omitempty"` // why there is no comparison ("" when there is)
}

// CompareTrigger scores the forecast trigger and the plain warning line on
// the group's runs: the forecast is fitted (and conformal-corrected) on
// every other run, and scored on the rest, call by call — before each call
// it is asked from the spend so far, as the engine asks it after every
// call. A run recorded with totals only has one decision point, before it
// starts.
func CompareTrigger(prices *pricing.Catalogue, runs []replay.Run, hardCap, line budget.USD) TriggerComparison {
	tc := TriggerComparison{Cap: hardCap, Line: line}
	fitOn, test := alternate(runs)
	m := FitForecast(prices, fitOn, forecast.Options{})
	tc.FitRuns = m.Runs()
	var leftF, leftP []budget.USD
	perCall := false
	for _, r := range test {
		perCall = perCall || len(r.Calls) > 0
		path, final, ok := spendPath(prices, r)
		if !ok {
			continue
		}
		tc.Runs++
		solved := r.Resolved != nil && *r.Resolved
		// The decision points: the spend before each call.
		warnF, warnP := budget.USD(-1), budget.USD(-1)
		for _, spent := range path {
			if spent >= hardCap {
				break
			}
			if f := m.Forecast(spent); warnF < 0 && f.OK && f.High > hardCap {
				warnF = spent
			}
			if warnP < 0 && spent >= line {
				warnP = spent
			}
		}
		score := func(s *WarningScore, warnedAt budget.USD, left *[]budget.USD) {
			if final >= hardCap {
				s.Reached++
				if warnedAt >= 0 {
					s.Warned++
					*left = append(*left, hardCap-warnedAt)
				}
				return
			}
			s.Under++
			if warnedAt >= 0 {
				s.FalseAlarms++
				if solved {
					s.SolvedAlarms++
				}
			}
		}
		score(&tc.Forecast, warnF, &leftF)
		score(&tc.Plain, warnP, &leftP)
	}
	tc.Forecast.Left, tc.Plain.Left = medianUSD(leftF), medianUSD(leftP)
	switch {
	case !perCall:
		tc.Why = "the runs record totals only: no spend call by call to warn from"
	case tc.FitRuns < forecast.DefaultMinReached:
		tc.Why = fmt.Sprintf("too few runs to fit the forecast on: %d, at least %d needed", tc.FitRuns, forecast.DefaultMinReached)
	}
	return tc
}

// spendPath is the spend of a run before each of its calls, and its
// final spend; false when its spend is unknown.
func spendPath(prices *pricing.Catalogue, r replay.Run) (path []budget.USD, final budget.USD, ok bool) {
	f := figures(prices, r)
	if !f.usdOK {
		return nil, 0, false
	}
	if len(r.Calls) == 0 {
		return []budget.USD{0}, f.usd, true
	}
	var spent budget.USD
	for _, c := range r.Calls {
		path = append(path, spent)
		one := replay.Run{InstanceID: r.InstanceID, System: r.System, Model: r.Model, Route: r.Route, Calls: []replay.Call{c}}
		cf := figures(prices, one)
		if !cf.usdOK {
			return nil, 0, false
		}
		spent += cf.usd
	}
	return path, f.usd, true
}

func medianUSD(v []budget.USD) budget.USD {
	if len(v) == 0 {
		return 0
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	return v[(len(v)-1)/2]
}

// WriteTrigger writes the comparison and the overshoot of onHard:
// finish-call for one group.
func WriteTrigger(w io.Writer, tc TriggerComparison, o Overshoot) error {
	fmt.Fprintf(w, "\n  WARNING before the cap, at hard %s, scored on %d runs (the forecast fitted on the others):\n", tc.Cap, tc.Runs)
	if tc.Why != "" {
		fmt.Fprintf(w, "    no figure: %s\n", tc.Why)
	} else {
		writeScore(w, "forecast trigger (warning.forecast: hard)", tc.Forecast)
		writeScore(w, fmt.Sprintf("plain warning line at %s (the proposed optimal)", tc.Line), tc.Plain)
		fmt.Fprintf(w, "    (what degrading then saves is not replayable: a degraded run is another run)\n")
	}
	_, err := fmt.Fprintf(w, "  onHard: finish-call would overshoot the cap by up to one call: %s\n", o)
	return err
}

func writeScore(w io.Writer, what string, s WarningScore) {
	left := ""
	if s.Warned > 0 {
		left = fmt.Sprintf(", a median %s left under the cap when warned", cents(s.Left))
	}
	fmt.Fprintf(w, "    %s: warned %d of %d runs that reached the cap%s; warned %d of %d that ended under it (%d of them solved)\n",
		what, s.Warned, s.Reached, left, s.FalseAlarms, s.Under, s.SolvedAlarms)
}
