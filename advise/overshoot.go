package advise

import (
	"fmt"
	"sort"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

// Overshoot is the price of onHard: finish-call read from history: the
// call in flight at the cap is let end, so the task ends past its cap by
// up to that call's spend. One call's spend in the corpus is what it costs.
type Overshoot struct {
	// Model is the model whose calls were read ("" when the history has
	// none of the task's model and every call was read).
	Model string `json:"model"`
	// Calls is how many calls had a known spend.
	Calls int `json:"calls"`
	// Median, P90 and Max are the spend of one call.
	Median budget.USD `json:"medianUsd"`
	P90    budget.USD `json:"p90Usd"`
	Max    budget.USD `json:"maxUsd"`
	// Why says why there is no figure (no call recorded one by one).
	Why string `json:"why,omitempty"`
}

// FinishCallOvershoot reads the spend of one call from runs: the calls of
// model where there are any, else all calls.
func FinishCallOvershoot(prices *pricing.Catalogue, runs []replay.Run, model string) Overshoot {
	o := Overshoot{Model: model}
	spends := callSpends(prices, runs, model)
	if len(spends) == 0 {
		o.Model = ""
		spends = callSpends(prices, runs, "")
	}
	if len(spends) == 0 {
		o.Why = "the history records no call one by one with a known spend (totals only)"
		return o
	}
	sort.Slice(spends, func(i, j int) bool { return spends[i] < spends[j] })
	o.Calls = len(spends)
	o.Median, o.P90, o.Max = replay.Quantile(spends, 0.5), replay.Quantile(spends, 0.9), spends[len(spends)-1]
	return o
}

// callSpends prices every recorded call of runs of model ("": any) whose
// spend is known, the way a replay prices it.
func callSpends(prices *pricing.Catalogue, runs []replay.Run, model string) []budget.USD {
	var out []budget.USD
	for _, r := range runs {
		for _, c := range r.Calls {
			m := c.Model
			if m == "" {
				m = r.Model
			}
			if model != "" && m != model {
				continue
			}
			one := replay.Run{InstanceID: r.InstanceID, System: r.System, Model: r.Model, Route: r.Route, Calls: []replay.Call{c}}
			if f := figures(prices, one); f.usdOK {
				out = append(out, f.usd)
			}
		}
	}
	return out
}

// String says the overshoot for purser check: "one call spent $0.04
// (median), $0.19 (p90), $1.10 (most) in 5230 calls of gpt-5".
func (o Overshoot) String() string {
	if o.Why != "" {
		return "no figure: " + o.Why
	}
	of := "of " + o.Model
	if o.Model == "" {
		of = "of every model (none of the task's)"
	}
	return fmt.Sprintf("one call spent %s (median), %s (p90), %s (most) in %d calls %s", cents(o.Median), cents(o.P90), cents(o.Max), o.Calls, of)
}
