// Package forecast says what a task will likely have spent when it ends,
// from what it has spent so far and the history of runs like it: the
// median and an interval of the final spend, and how often past runs that
// got this far were solved. The amount forecast is money (budget.USD) or
// tokens (int64): the method is the same, only the Unit differs.
//
// The forecast is the distribution of the final spend of the history's
// runs that spent at least as much as the task has now: runs that got this
// far. Spend only grows, so a run recorded with its totals alone still says
// which amounts it passed. Runs of the same task vary up to 30× and agents'
// own guesses are poor, so the interval is not trusted as read: it is
// calibrated (split conformal prediction, on a log scale) against held-out
// runs, and its coverage is what Evaluate measures on runs it never saw.
//
// The package is pure: no I/O, no clock.
package forecast

import (
	"fmt"
	"math"
	"sort"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// DefaultCoverage is the share of runs the interval is meant to hold.
const DefaultCoverage = 0.80

// DefaultMinReached is how many history runs must have got as far as the
// task for a forecast to be made: with fewer, the tail of the history is a
// handful of runs, and an interval read from them is noise.
const DefaultMinReached = 20

// Amount is what a forecast is of: money (budget.USD, nano-dollars) or
// tokens (int64). Both only grow during a run.
type Amount interface{ ~int64 }

// Unit is the scale of an Amount, as the forecast needs it.
type Unit struct {
	// Floor is added to amounts before their logarithm is taken, so that
	// a run that used nothing has a finite score.
	Floor float64
	// First is the first checkpoint after nothing used: the grid a model
	// is calibrated and scored on doubles from it (Checkpoints).
	First int64
}

// The units of money and tokens. Money's floor is a tenth of a cent and its
// grid starts at a cent; tokens' floor is a thousand tokens and their grid
// starts at ten thousand — about what a cent buys of a mid-priced model's
// input, so that the two grids are alike in how often they ask.
var (
	USDUnit    = Unit{Floor: 1_000_000, First: budget.NanosPerDollar / 100}
	TokensUnit = Unit{Floor: 1_000, First: 10_000}
)

// Sample is one finished run of the history.
type Sample[A Amount] struct {
	// Final is what the run had spent (or used) when it ended.
	Final A
	// Solved is whether it was solved; nil when the history does not say.
	Solved *bool
}

// Options shape a Model; zero fields take the defaults.
type Options struct {
	// Coverage is the share of runs the interval is meant to hold
	// (DefaultCoverage).
	Coverage float64
	// MinReached is the fewest history runs that got as far as the task
	// for a forecast to be made (DefaultMinReached).
	MinReached int
	// Unit is the scale of the amounts (USDUnit when zero).
	Unit Unit
}

func (o Options) withDefaults() Options {
	if o.Coverage <= 0 || o.Coverage >= 1 {
		o.Coverage = DefaultCoverage
	}
	if o.MinReached <= 0 {
		o.MinReached = DefaultMinReached
	}
	if o.Unit.Floor <= 0 || o.Unit.First <= 0 {
		o.Unit = USDUnit
	}
	return o
}

// Model forecasts from one history. It is immutable once made and safe for
// concurrent use.
type Model[A Amount] struct {
	opts   Options
	finals []A // ascending
	// labelled[i] and solved[i] count the runs from i on (finals[i:])
	// that carry a label, and that were solved.
	labelled, solved []int
	// widen is the conformal correction on the log scale: the interval's
	// ends are moved out by it (in, when negative). Zero until
	// Conformalize.
	widen      float64
	calibrated int // (run, checkpoint) pairs the correction was read from
}

// Fit makes a model from a history of finished runs.
func Fit[A Amount](history []Sample[A], opts Options) *Model[A] {
	m := &Model[A]{opts: opts.withDefaults()}
	sorted := append([]Sample[A](nil), history...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Final < sorted[j].Final })
	n := len(sorted)
	m.finals = make([]A, n)
	m.labelled = make([]int, n+1)
	m.solved = make([]int, n+1)
	for i := n - 1; i >= 0; i-- {
		s := sorted[i]
		m.finals[i] = s.Final
		m.labelled[i], m.solved[i] = m.labelled[i+1], m.solved[i+1]
		if s.Solved != nil {
			m.labelled[i]++
			if *s.Solved {
				m.solved[i]++
			}
		}
	}
	return m
}

// Runs is how many runs the model was fitted on.
func (m *Model[A]) Runs() int { return len(m.finals) }

// Forecast is what a task will likely have spent when it ends.
type Forecast[A Amount] struct {
	// Spent is what the task has spent (or used) so far: the forecast's
	// condition.
	Spent A
	// Reached is how many history runs spent at least Spent.
	Reached int
	// OK is false when there is too little history to forecast; Why then
	// says so, and the figures are zero and mean nothing.
	OK  bool
	Why string
	// Median, Low and High are the median and the interval of the final
	// spend (Coverage of runs are meant to end inside [Low, High]).
	Median, Low, High A
	// Coverage is the share the interval is meant to hold.
	Coverage float64
	// Calibrated is false when the interval is read from the history
	// alone, with no conformal correction.
	Calibrated bool
	// PSolved is the share of the labelled runs that got this far and were
	// solved; Labelled how many labelled runs that is (0: PSolved means
	// nothing).
	PSolved  float64
	Labelled int
}

// Forecast forecasts the final spend of a task that has spent spent.
func (m *Model[A]) Forecast(spent A) Forecast[A] {
	f := Forecast[A]{Spent: spent, Coverage: m.opts.Coverage, Calibrated: m.calibrated > 0}
	lo, mid, hi, reached := m.raw(spent)
	f.Reached = reached
	if reached < m.opts.MinReached {
		f.Why = fmt.Sprintf("not enough history: %d of %d past runs reached %s (at least %d needed)", reached, len(m.finals), m.say(spent), m.opts.MinReached)
		if len(m.finals) < m.opts.MinReached {
			// The same whatever is spent: said once, not after every call.
			f.Why = fmt.Sprintf("not enough history: %d past run(s) of this kind, at least %d needed", len(m.finals), m.opts.MinReached)
		}
		return f
	}
	f.OK = true
	f.Median = mid
	f.Low, f.High = m.widened(spent, lo, hi)
	i := len(m.finals) - reached
	if f.Labelled = m.labelled[i]; f.Labelled > 0 {
		f.PSolved = float64(m.solved[i]) / float64(f.Labelled)
	}
	return f
}

// raw reads the median and the central interval of the final spend of the
// runs that got to spent, uncorrected.
func (m *Model[A]) raw(spent A) (lo, mid, hi A, reached int) {
	i := sort.Search(len(m.finals), func(i int) bool { return m.finals[i] >= spent })
	tail := m.finals[i:]
	if len(tail) == 0 {
		return 0, 0, 0, 0
	}
	tailShare := (1 - m.opts.Coverage) / 2
	return quantile(tail, tailShare), quantile(tail, 0.5), quantile(tail, 1-tailShare), len(tail)
}

// widened applies the conformal correction to a raw interval; the low end
// never goes under what is spent already.
func (m *Model[A]) widened(spent, lo, hi A) (A, A) {
	if m.widen != 0 {
		lo = scale(lo, -m.widen, m.opts.Unit.Floor)
		hi = scale(hi, m.widen, m.opts.Unit.Floor)
	}
	return max(lo, spent), max(hi, spent)
}

// scale multiplies an amount by e^k on the log scale scores use, shifted
// by floor.
func scale[A Amount](a A, k, floor float64) A {
	v := (float64(a)+floor)*math.Exp(k) - floor
	if v < 0 {
		return 0
	}
	if v > math.MaxInt64/2 {
		return A(math.MaxInt64 / 2)
	}
	return A(math.Round(v))
}

func (m *Model[A]) logOf(a A) float64 { return math.Log(float64(a) + m.opts.Unit.Floor) }

// say is an amount as a reason says it: money as money, tokens as tokens.
func (m *Model[A]) say(a A) string {
	if m.opts.Unit == TokensUnit {
		return fmt.Sprintf("%d tokens", int64(a))
	}
	return budget.USD(a).String()
}

// quantile is the nearest-rank quantile p of sorted values.
func quantile[A Amount](sorted []A, p float64) A {
	// The epsilon keeps 0.9 × 100 (90.00000000000001 in floating point)
	// at rank 90.
	k := int(math.Ceil(p*float64(len(sorted))-1e-9)) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// Checkpoints are the amounts at which a run that ended at final is
// forecast when a model is calibrated or evaluated: nothing spent yet, then
// every amount of a doubling grid from a cent that the run passed. The grid
// does not depend on where the run ended except through what it passed,
// which is what a live forecast sees too.
func Checkpoints(final budget.USD) []budget.USD { return Grid(USDUnit, final) }

// Grid is Checkpoints in unit u: nothing used, then every amount of a
// doubling grid from u.First that a run ending at final passed.
func Grid[A Amount](u Unit, final A) []A {
	out := []A{0}
	for g := A(u.First); g < final && g > 0; g *= 2 {
		out = append(out, g)
	}
	return out
}

// score is how far outside the raw interval a final spend fell, on the log
// scale (negative inside).
func (m *Model[A]) score(spent, final A) (float64, bool) {
	lo, _, hi, reached := m.raw(spent)
	if reached < m.opts.MinReached {
		return 0, false
	}
	lo, hi = max(lo, spent), max(hi, spent)
	return math.Max(m.logOf(lo)-m.logOf(final), m.logOf(final)-m.logOf(hi)), true
}

// Conformalize corrects the model's intervals on held-out runs the model
// was not fitted on (split conformal prediction): the score of each
// (run, checkpoint) is how far outside the raw interval the run ended, and
// the interval is moved out (or in) by the finite-sample quantile of those
// scores at the model's coverage. It reports how many pairs were scored.
func (m *Model[A]) Conformalize(held []Sample[A]) int {
	return m.setWiden(m.scores(held))
}

// scores are the conformal scores of held's runs at each checkpoint with
// enough history.
func (m *Model[A]) scores(held []Sample[A]) []float64 {
	var scores []float64
	for _, s := range held {
		for _, c := range Grid(m.opts.Unit, s.Final) {
			if e, ok := m.score(c, s.Final); ok {
				scores = append(scores, e)
			}
		}
	}
	return scores
}

// setWiden sets the correction to the finite-sample conformal quantile of
// scores, and reports how many there were (0: no correction).
func (m *Model[A]) setWiden(scores []float64) int {
	if len(scores) == 0 {
		return 0
	}
	sort.Float64s(scores)
	n := len(scores)
	k := int(math.Ceil(float64(n+1)*m.opts.Coverage)) - 1
	m.widen = scores[min(max(k, 0), n-1)]
	m.calibrated = n
	return n
}

// FitCross makes a model from all the runs of folds, its intervals
// corrected by cross-conformal prediction: each fold's runs are scored by
// a model fitted on the other folds only, and the correction is the
// conformal quantile of all those scores. Folds are groups of runs that
// are alike among themselves and may differ from the rest (the runs of
// one repository): a correction read from runs of groups the fit never saw
// holds on a new group too, where one read from runs like the fitted ones
// (Conformalize on an alternate half) under-covers. Every run serves both
// to fit and to correct, so fewer runs are needed before any number.
func FitCross[A Amount](folds [][]Sample[A], opts Options) *Model[A] {
	var scores []float64
	var every []Sample[A]
	for i, fold := range folds {
		var rest []Sample[A]
		for j, other := range folds {
			if j != i {
				rest = append(rest, other...)
			}
		}
		scores = append(scores, Fit(rest, opts).scores(fold)...)
		every = append(every, fold...)
	}
	m := Fit(every, opts)
	m.setWiden(scores)
	return m
}

// Calibrated is how many (run, checkpoint) scores the model's correction
// was read from; 0 when its intervals are uncorrected.
func (m *Model[A]) Calibrated() int { return m.calibrated }

// Score is how a model's forecasts fared on runs it never saw, at every
// checkpoint of each run.
type Score[A Amount] struct {
	// Runs is how many runs were scored; Checkpoints how many forecasts
	// were made; Skipped how many checkpoints had too little history.
	Runs, Checkpoints, Skipped int
	// Covered is how many finals fell inside the interval; Coverage the
	// share.
	Covered  int
	Coverage float64
	// CoverageSE is the standard error of Coverage, the runs taken as the
	// independent draws (a run's checkpoints are not: they share its
	// final): a coverage within about two of them of the goal does not
	// miss it.
	CoverageSE float64
	// MedianRelError is the median of |median − final| / final over the
	// forecasts (finals of zero left out); MedianAbsError the median of
	// |median − final|.
	MedianRelError float64
	MedianAbsError A
	// Brier is the mean squared error of P(solved) against the outcome
	// over the labelled checkpoints (0 is perfect; always answering 0.5
	// scores 0.25); BrierN how many there were.
	Brier  float64
	BrierN int
}

// Evaluate scores a model's forecasts on test runs.
func (m *Model[A]) Evaluate(test []Sample[A]) Score[A] {
	var t tally[A]
	for _, s := range test {
		t.run(m, s)
	}
	return t.score()
}

// tally adds up forecasts scored against the finals of their runs.
type tally[A Amount] struct {
	sc     Score[A]
	rel    []float64
	abs    []A
	brier  float64
	perRun [][2]int // each run's covered and scored checkpoints
}

// run scores m's forecasts at every checkpoint of s, and returns the run's
// covered and scored checkpoints.
func (t *tally[A]) run(m *Model[A], s Sample[A]) [2]int {
	t.sc.Runs++
	var run [2]int
	for _, c := range Grid(m.opts.Unit, s.Final) {
		f := m.Forecast(c)
		if !f.OK {
			t.sc.Skipped++
			continue
		}
		t.sc.Checkpoints++
		run[1]++
		if f.Low <= s.Final && s.Final <= f.High {
			t.sc.Covered++
			run[0]++
		}
		d := f.Median - s.Final
		if d < 0 {
			d = -d
		}
		t.abs = append(t.abs, d)
		if s.Final > 0 {
			t.rel = append(t.rel, float64(d)/float64(s.Final))
		}
		if s.Solved != nil && f.Labelled > 0 {
			y := 0.0
			if *s.Solved {
				y = 1
			}
			t.brier += (f.PSolved - y) * (f.PSolved - y)
			t.sc.BrierN++
		}
	}
	t.perRun = append(t.perRun, run)
	return run
}

func (t *tally[A]) score() Score[A] {
	sc := t.sc
	if sc.Checkpoints > 0 {
		sc.Coverage = float64(sc.Covered) / float64(sc.Checkpoints)
		sc.CoverageSE = clusterSE(t.perRun, sc.Coverage, sc.Checkpoints)
		sort.Float64s(t.rel)
		if len(t.rel) > 0 {
			sc.MedianRelError = t.rel[(len(t.rel)-1)/2]
		}
		sort.Slice(t.abs, func(i, j int) bool { return t.abs[i] < t.abs[j] })
		sc.MedianAbsError = t.abs[(len(t.abs)-1)/2]
	}
	if sc.BrierN > 0 {
		sc.Brier = t.brier / float64(sc.BrierN)
	}
	return sc
}

// Spend is a money forecast as the domain carries it to every view (the
// engine's events, STATUS.md, status --json, the dashboard, alerts).
func Spend(f Forecast[budget.USD]) purser.SpendForecast {
	return purser.SpendForecast{OK: f.OK, Why: f.Why, Spent: f.Spent, Median: f.Median, Low: f.Low, High: f.High,
		Coverage: f.Coverage, Calibrated: f.Calibrated, PSolved: f.PSolved, Labelled: f.Labelled, Reached: f.Reached}
}

// Tokens is a tokens forecast as the domain carries it (beside the money
// forecast, purser.SpendForecast.Tokens).
func Tokens(f Forecast[int64]) purser.TokensForecast {
	return purser.TokensForecast{OK: f.OK, Why: f.Why, Used: f.Spent, Median: f.Median, Low: f.Low, High: f.High,
		Coverage: f.Coverage, Calibrated: f.Calibrated, PSolved: f.PSolved, Labelled: f.Labelled, Reached: f.Reached}
}

// clusterSE is the standard error of a share p of n checkpoints grouped
// in runs (covered, scored): the ratio estimator's, with the runs as the
// independent units.
func clusterSE(runs [][2]int, p float64, n int) float64 {
	var ss float64
	for _, r := range runs {
		d := float64(r[0]) - p*float64(r[1])
		ss += d * d
	}
	k := float64(len(runs))
	if k < 2 {
		return 0
	}
	return math.Sqrt(ss*k/(k-1)) / float64(n)
}

// String says the forecast in one line, as purser.SpendForecast.String
// (money) and purser.TokensForecast.String (tokens) do: "forecast to
// finish $1.40 (80 %: $0.90–$2.60); of past runs that reached $0.80, 31 %
// were solved", or why there is none.
func (f Forecast[A]) String() string {
	if usd, ok := any(f).(Forecast[budget.USD]); ok {
		return Spend(usd).String()
	}
	return Tokens(Forecast[int64]{OK: f.OK, Why: f.Why, Spent: int64(f.Spent), Median: int64(f.Median), Low: int64(f.Low), High: int64(f.High),
		Coverage: f.Coverage, Calibrated: f.Calibrated, PSolved: f.PSolved, Labelled: f.Labelled, Reached: f.Reached}).String()
}
