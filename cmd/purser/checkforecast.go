package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/advise"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

// describeOnHard says, for a task whose budget lets the call in flight end
// at the hard cap (onHard: finish-call), what that costs past the cap: one
// call's spend in the corpus its budget names, so that the choice is made
// knowing its price. check opens no database: without a corpus it says so.
func describeOnHard(w io.Writer, t purser.Task, prices *pricing.Catalogue) {
	if !t.Budget.FinishCall() {
		return
	}
	fmt.Fprintf(w, "  onHard      finish-call: the call in flight at a hard cap ends and is booked, then the task is BLOCKED\n")
	src := t.Budget.Forecast
	if src == nil {
		fmt.Fprintf(w, "  overshoot   up to one call's spend; name a corpus (budget.forecastFrom.corpus) to see it from history\n")
		return
	}
	corpus := src.Corpus
	if !filepath.IsAbs(corpus) && t.File != "" {
		corpus = filepath.Join(filepath.Dir(t.File), corpus)
	}
	runs, err := replay.ParseFile(corpus)
	if err != nil {
		fmt.Fprintf(w, "  overshoot   unknown: %v\n", err)
		return
	}
	if prices == nil {
		prices = pricing.New()
	}
	model, _ := t.Backend.Model(t.ModelTier)
	fmt.Fprintf(w, "  overshoot   %s (%s)\n", advise.FinishCallOvershoot(prices, runs, model), filepath.Base(corpus))
}
