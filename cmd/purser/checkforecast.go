package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/advise"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

// triggerCaps names the hard caps the forecast trigger compares with.
func triggerCaps(h budget.HardLimits) string {
	switch {
	case h.USD != nil && h.Tokens != nil:
		return "hard.usd (or the tokens forecast's, hard.tokens)"
	case h.Tokens != nil:
		return "hard.tokens (the tokens forecast's)"
	}
	return "hard.usd"
}

// describeOnHard says what a task's budget asks beyond its tiers: the
// forecast trigger and where it is fitted from, stuckAfter, and, for a
// budget that lets the call in flight end at the hard cap (onHard:
// finish-call), what that costs past the cap: one
// call's spend in the corpus its budget names, so that the choice is made
// knowing its price. check opens no database: without a corpus it says so.
func describeOnHard(w io.Writer, t purser.Task, prices *pricing.Catalogue) {
	from := "this project's database (finished tasks of the same model)"
	if src := t.Budget.Forecast; src != nil {
		from = "corpus " + src.Corpus
	}
	if t.Budget.Warning.Forecast == budget.ForecastHard {
		fmt.Fprintf(w, "  forecast    WARNING once the forecast's upper bound passes %s; fitted on %s\n", triggerCaps(t.Budget.Hard), from)
	}
	if n := t.Budget.StuckAfter; n != nil {
		fmt.Fprintf(w, "  stuck       BLOCKED after %d iterations in a row failing the same validators with no change to the workspace\n", *n)
	}
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
