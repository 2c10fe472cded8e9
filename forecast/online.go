package forecast

import (
	"math"
	"sort"
)

// DefaultAdaptRate is the step of the adaptive forecast's update (Online):
// the value Gibbs and Candès (2021, "Adaptive conformal inference under
// distribution shift") use, not tuned on any corpus of Purser's.
const DefaultAdaptRate = 0.005

// Online is a forecast that keeps learning as runs finish, in the order
// they finish (adaptive conformal inference). It starts from a
// cross-conformal fit on the history; then, after each run ends:
//   - the share of its checkpoints whose interval missed its final moves
//     the level the interval is read at (α ← α + rate·(1−coverage − miss)):
//     a stretch of misses widens the next intervals, a stretch of hits
//     narrows them, so coverage over time holds under a shift that a fit
//     on the past cannot foresee;
//   - the run joins the history, and its conformal scores (read by the
//     forecast it was forecast with, before it joined) the correction's.
//
// A run is forecast before any of it is learnt: nothing of a run's outcome
// reaches its own forecasts. It is not safe for concurrent use.
type Online[A Amount] struct {
	opts    Options
	rate    float64
	alpha   float64 // the miss rate the interval is read at now
	history []Sample[A]
	scores  []float64 // sorted
	m       *Model[A]
}

// NewOnline starts an adaptive forecast from a history cut in folds, as
// FitCross reads it; rate is the update's step (DefaultAdaptRate when not
// positive).
func NewOnline[A Amount](folds [][]Sample[A], opts Options, rate float64) *Online[A] {
	opts = opts.withDefaults()
	if rate <= 0 {
		rate = DefaultAdaptRate
	}
	o := &Online[A]{opts: opts, rate: rate, alpha: 1 - opts.Coverage}
	for i, fold := range folds {
		var rest []Sample[A]
		for j, other := range folds {
			if j != i {
				rest = append(rest, other...)
			}
		}
		o.scores = append(o.scores, Fit(rest, opts).scores(fold)...)
		o.history = append(o.history, fold...)
	}
	sort.Float64s(o.scores)
	o.refit()
	return o
}

// Model is the forecast as it stands: fitted on every run seen, its
// interval read at the adapted level.
func (o *Online[A]) Model() *Model[A] { return o.m }

// Level is the coverage the interval is read at now (the target, moved by
// the runs seen since the start).
func (o *Online[A]) Level() float64 { return 1 - o.alpha }

// Observe learns from a run that has ended: covered and scored are how
// many of its checkpoints' intervals held its final, of how many were
// forecast (Evaluate's count for it, made by Model before this call).
func (o *Online[A]) Observe(s Sample[A], covered, scored int) {
	if scored > 0 {
		miss := 1 - float64(covered)/float64(scored)
		o.alpha += o.rate * ((1 - o.opts.Coverage) - miss)
	}
	more := o.m.scores([]Sample[A]{s})
	o.history = append(o.history, s)
	o.scores = append(o.scores, more...)
	sort.Float64s(o.scores)
	o.refit()
}

// refit fits the model on the history and sets its correction to the
// scores' quantile at the adapted level: at a level of 1 or more the
// interval holds every amount; at 0 or less, the raw one narrowed to the
// smallest score.
func (o *Online[A]) refit() {
	o.m = Fit(o.history, o.opts)
	n := len(o.scores)
	if n == 0 {
		return
	}
	o.m.calibrated = n
	level := 1 - o.alpha
	if level >= 1 {
		o.m.widen = math.Log(math.MaxInt64 / 4)
		return
	}
	k := int(math.Ceil(float64(n+1)*level)) - 1
	o.m.widen = o.scores[min(max(k, 0), n-1)]
}

// Learn forecasts a run that has ended at every checkpoint, as it stands,
// then learns from it (Observe): a history replayed in the order its runs
// ended leaves the forecast where it would be had it watched them.
func (o *Online[A]) Learn(s Sample[A]) {
	var t tally[A]
	run := t.run(o.m, s)
	o.Observe(s, run[0], run[1])
}

// FitAdaptive fits a forecast on a history cut in folds in time order, as
// it would stand after watching it: started (NewOnline) on the earlier
// half of the folds and learning (Learn) from each run of the later half
// in turn. With fewer than four folds it is FitCross.
func FitAdaptive[A Amount](folds [][]Sample[A], opts Options) *Model[A] {
	if len(folds) < 4 {
		return FitCross(folds, opts)
	}
	half := len(folds) / 2
	o := NewOnline(folds[:half], opts, 0)
	for _, f := range folds[half:] {
		for _, s := range f {
			o.Learn(s)
		}
	}
	return o.Model()
}

// EvaluateOnline scores an adaptive forecast on test runs in the order
// given (the order they ended): each run is forecast by the forecast as it
// stands, then learnt from.
func (o *Online[A]) EvaluateOnline(test []Sample[A]) Score[A] {
	var t tally[A]
	for _, s := range test {
		run := t.run(o.m, s)
		o.Observe(s, run[0], run[1])
	}
	return t.score()
}
