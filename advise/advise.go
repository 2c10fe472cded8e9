// Package advise proposes budgets from recorded runs — optimal near what
// solved runs typically cost, hard near a high quantile — and shows what
// candidate hard caps would have saved and cut.
package advise

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

// The quantiles of solved runs the proposal is read at.
const (
	OptimalQuantile = 0.50
	WarningQuantile = 0.75
	HardQuantile    = 0.95
)

// MinRuns is how many runs a group needs for any proposal: with one, the
// quantiles are one and the same figure (optimal = warning = hard), which
// is no advice.
const MinRuns = 2

// MinSolved is how many solved runs a group needs for the proposal to be
// read from solved runs alone; below it, all runs are used.
const MinSolved = 5

// DefaultMaxIterations is the iteration cap a proposed budget carries. It
// is a default, not advice: the recorded runs count calls, not Purser
// iterations (an iteration may make several calls, a corpus run has none),
// so there is no distribution to read it from.
const DefaultMaxIterations = 10

// Proposal is a proposed threshold set for one metric, in the metric's unit.
type Proposal struct {
	Metric                 budget.Metric
	Optimal, Warning, Hard int64
}

// Candidate is one hard cap and what it would have done to the group.
type Candidate struct {
	Basis     string // e.g. "p90 of solved"
	Cap       int64  // in the metric's unit
	Stopped   int
	SolvedCut int
	SavedUSD  budget.USD
	SpentUSD  budget.USD
}

// Group is the advice for one system and model.
type Group struct {
	System, Model string
	Runs, Solved  int
	// TooFew is set when the group has fewer than MinRuns runs: it gets no
	// proposal.
	TooFew     bool
	TotalsOnly bool   // totals only: savings (total − cap) are lower bounds
	Basis      string // "solved runs" or "all runs (too few solved)"
	Proposals  []Proposal
	// TradeOff is for the first proposal's metric (money when known).
	TradeOff []Candidate
	// Values are each run's recorded value of the first proposal's metric,
	// and whether it was solved: the distribution to draw.
	Values []Point
}

// Point is one run on the distribution.
type Point struct {
	Value  int64
	Solved bool
}

type runFigures struct {
	run    replay.Run
	usd    budget.USD
	usdOK  bool
	tokens int64
	time   time.Duration
	solved bool
}

func figures(prices *pricing.Catalogue, r replay.Run) runFigures {
	f := runFigures{run: r, solved: r.Resolved != nil && *r.Resolved}
	noCap := budget.Config{Hard: budget.HardLimits{MaxIterations: ptrInt(1)}}
	res, _ := replay.ReplayRun(noCap, prices, r)
	f.usd, f.usdOK, f.tokens = res.RecordedUSD, res.USDSource != budget.SourceUnknown && res.USDSource != budget.SourcePartial, res.SpentTokens
	f.time = r.WallTime
	if f.time == 0 && len(r.Calls) > 1 && !r.Calls[0].At.IsZero() && !r.Calls[len(r.Calls)-1].At.IsZero() {
		f.time = r.Calls[len(r.Calls)-1].At.Sub(r.Calls[0].At)
	}
	return f
}

func ptrInt(v int) *int { return &v }

// Advise groups runs by system and model and advises each group.
func Advise(prices *pricing.Catalogue, runs []replay.Run) ([]Group, error) {
	byKey := map[[2]string][]replay.Run{}
	var order [][2]string
	for _, r := range runs {
		k := [2]string{r.System, r.Model}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	var out []Group
	for _, k := range order {
		g, err := adviseGroup(prices, k[0], k[1], byKey[k])
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// adviseGroup advises one system and model: each run's figures; a proposal
// per metric, read at the quantiles of the basis (its solved runs, or all of
// them when too few solved); and what candidate hard caps on the first
// proposal's metric would have saved and cut.
func adviseGroup(prices *pricing.Catalogue, system, model string, runs []replay.Run) (Group, error) {
	g := Group{System: system, Model: model, Runs: len(runs), Basis: "solved runs"}
	if len(runs) < MinRuns {
		g.TooFew = true
		for _, r := range runs {
			if r.Resolved != nil && *r.Resolved {
				g.Solved++
			}
		}
		return g, nil
	}
	s, allUSD := g.sample(prices, runs)
	defs := metricDefs(s.figs, allUSD)
	for _, d := range defs {
		if p, ok := d.propose(s.pick(d.value)); ok {
			g.Proposals = append(g.Proposals, p)
		}
	}
	if len(g.Proposals) == 0 {
		return g, nil
	}
	primary := g.Proposals[0]
	var value func(runFigures) int64
	for _, d := range defs {
		if d.m == primary.Metric {
			value = d.value
		}
	}
	for _, f := range s.figs {
		g.Values = append(g.Values, Point{Value: value(f), Solved: f.solved})
	}
	err := g.tradeOff(prices, runs, primary, s.pick(value))
	return g, err
}

// sample is a group's runs' figures and which of them proposals are read
// from.
type sample struct {
	figs  []runFigures
	basis func(runFigures) bool
}

// pick is the basis runs' values of one metric, sorted.
func (s sample) pick(value func(runFigures) int64) []int64 {
	var vs []int64
	for _, f := range s.figs {
		if s.basis(f) {
			vs = append(vs, value(f))
		}
	}
	return replay.Sorted(vs)
}

// sample reads each run's figures, counts the solved runs, notes a run
// recorded as totals only, and chooses the basis: the solved runs, or all
// runs when fewer than MinSolved were solved. allUSD says every run's
// dollars are known.
func (g *Group) sample(prices *pricing.Catalogue, runs []replay.Run) (s sample, allUSD bool) {
	s.figs = make([]runFigures, len(runs))
	allUSD = true
	for i, r := range runs {
		s.figs[i] = figures(prices, r)
		allUSD = allUSD && s.figs[i].usdOK
		if s.figs[i].solved {
			g.Solved++
		}
		if len(r.Calls) == 0 {
			g.TotalsOnly = true
		}
	}
	s.basis = func(f runFigures) bool { return f.solved }
	if g.Solved < MinSolved {
		g.Basis = fmt.Sprintf("all runs (only %d solved)", g.Solved)
		s.basis = func(runFigures) bool { return true }
	}
	return s, allUSD
}

// metricDef is a metric a proposal can be made for: whether every run
// knows it, how a run's value is read and how a threshold is rounded.
type metricDef struct {
	m     budget.Metric
	ok    bool
	value func(runFigures) int64
	round func(int64) int64
}

// metricDefs lists the metrics in proposal order: money (when every run's
// dollars are known), tokens, time (when every run's is).
func metricDefs(figs []runFigures, allUSD bool) []metricDef {
	hasTime := true
	for _, f := range figs {
		hasTime = hasTime && f.time > 0
	}
	return []metricDef{
		{budget.Money, allUSD, func(f runFigures) int64 { return int64(f.usd) }, roundUSD},
		{budget.Tokens, true, func(f runFigures) int64 { return f.tokens }, roundTokens},
		{budget.Time, hasTime, func(f runFigures) int64 { return int64(f.time) }, roundTime},
	}
}

// propose reads thresholds for d from the basis runs' sorted values vs, at
// the optimal, warning and hard quantiles, rounded and kept in order; false
// when d is unknown or every value is 0.
func (d metricDef) propose(vs []int64) (Proposal, bool) {
	if !d.ok || len(vs) == 0 || vs[len(vs)-1] == 0 {
		return Proposal{}, false
	}
	p := Proposal{Metric: d.m,
		Optimal: d.round(replay.Quantile(vs, OptimalQuantile)),
		Warning: d.round(replay.Quantile(vs, WarningQuantile)),
		Hard:    d.round(replay.Quantile(vs, HardQuantile))}
	p.Optimal = max(p.Optimal, 1)
	p.Warning = max(p.Warning, p.Optimal)
	p.Hard = max(p.Hard, p.Warning)
	return p, true
}

// tradeOff replays the group's runs under candidate hard caps on the
// primary proposal's metric, one per distinct quantile of the basis runs'
// sorted values vs.
func (g *Group) tradeOff(prices *pricing.Catalogue, runs []replay.Run, primary Proposal, vs []int64) error {
	seen := map[int64]bool{}
	for _, q := range []struct {
		label string
		q     float64
	}{{"p50", 0.5}, {"p75", 0.75}, {"p90", 0.9}, {"p95", 0.95}, {"p99", 0.99}, {"max", 1}} {
		c := primary.roundFor(replay.Quantile(vs, q.q))
		if c <= 0 || seen[c] {
			continue
		}
		seen[c] = true
		cand, err := tryCap(prices, runs, primary.Metric, c)
		if err != nil {
			return err
		}
		cand.Basis = q.label + " of " + map[bool]string{true: "solved", false: "all"}[g.Solved >= MinSolved]
		g.TradeOff = append(g.TradeOff, cand)
	}
	return nil
}

func (p Proposal) roundFor(v int64) int64 {
	switch p.Metric {
	case budget.Money:
		return roundUSD(v)
	case budget.Tokens:
		return roundTokens(v)
	}
	return roundTime(v)
}

// Config returns the proposal as a budget: thresholds per metric, and the
// iteration cap given.
func Config(ps []Proposal, maxIterations int) budget.Config {
	cfg := budget.Config{Hard: budget.HardLimits{MaxIterations: &maxIterations}}
	for _, p := range ps {
		o, w, h := p.Optimal, p.Warning, p.Hard
		switch p.Metric {
		case budget.Money:
			ou, wu, hu := budget.USD(o), budget.USD(w), budget.USD(h)
			cfg.Optimal.USD, cfg.Warning.USD, cfg.Hard.USD = &ou, &wu, &hu
		case budget.Tokens:
			cfg.Optimal.Tokens, cfg.Warning.Tokens, cfg.Hard.Tokens = &o, &w, &h
		case budget.Time:
			om, wm, hm := budget.Minutes(o), budget.Minutes(w), budget.Minutes(h)
			cfg.Optimal.TimeMinutes, cfg.Warning.TimeMinutes, cfg.Hard.TimeMinutes = &om, &wm, &hm
		}
	}
	return cfg
}

func tryCap(prices *pricing.Catalogue, runs []replay.Run, m budget.Metric, c int64) (Candidate, error) {
	cfg := Config([]Proposal{{Metric: m, Optimal: c, Warning: c, Hard: c}}, math.MaxInt32)
	rep, err := replay.Replay(cfg, prices, runs)
	if err != nil {
		return Candidate{}, err
	}
	return Candidate{Cap: c, Stopped: rep.Summary.Stopped, SolvedCut: rep.Summary.SolvedCut, SavedUSD: rep.Summary.SavedUSD, SpentUSD: rep.Summary.SpentUSD}, nil
}

// roundUSD rounds money up to a readable figure: cents under $10, dimes
// under $100, dollars above.
func roundUSD(v int64) int64 {
	step := int64(budget.Dollars(1) / 100)
	switch {
	case v >= int64(budget.Dollars(100)):
		step = int64(budget.Dollars(1))
	case v >= int64(budget.Dollars(10)):
		step = int64(budget.Dollars(1) / 10)
	}
	return ceilTo(v, step)
}

func roundTokens(v int64) int64 {
	step := int64(1000)
	if v >= 1_000_000 {
		step = 10_000
	}
	return ceilTo(v, step)
}

func roundTime(v int64) int64 { return ceilTo(v, int64(time.Minute)) }

func ceilTo(v, step int64) int64 {
	if v <= 0 {
		return 0
	}
	return (v + step - 1) / step * step
}

// Histogram bins points into n equal bins from 0 to top (the last bin takes
// everything above), counting solved and unsolved runs.
func Histogram(points []Point, n int, top int64) (solved, unsolved []int) {
	solved, unsolved = make([]int, n), make([]int, n)
	if top <= 0 {
		top = 1
	}
	for _, p := range points {
		i := int(p.Value * int64(n) / top)
		i = min(max(i, 0), n-1)
		if p.Solved {
			solved[i]++
		} else {
			unsolved[i]++
		}
	}
	return solved, unsolved
}

// Top is the value the charts run up to: the 99th percentile of all runs, or
// the hard line if that is higher, so outliers do not squash the picture.
func Top(points []Point, hard int64) int64 {
	vs := make([]int64, len(points))
	for i, p := range points {
		vs[i] = p.Value
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	top := replay.Quantile(vs, 0.99)
	return max(top, hard*11/10, 1)
}
