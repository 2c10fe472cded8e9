package advise

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/forecast"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

// Calibration is how the forecast of one metric (money or tokens) fared
// for one system and model: fitted on its training runs, corrected
// (cross-conformal, by period) on them, and scored on test runs it never
// saw.
type Calibration struct {
	System, Model string
	// Metric is what was forecast: budget.Money (amounts in nano-dollars)
	// or budget.Tokens.
	Metric budget.Metric
	// Fit and Test are how many runs each part had; Folds how many
	// periods the fit runs were corrected over; Unpriced how
	// many runs were left out because what they spent (or used, for
	// tokens) is unknown.
	Fit, Folds, Test, Unpriced int
	// Raw is the score of the intervals as read from the fitted runs;
	// Calibrated after the conformal correction; Adaptive that of the
	// forecast that learns from each test run once it has ended, in time
	// order (forecast.Online), from the same start as Calibrated.
	Raw, Calibrated, Adaptive forecast.Score[int64]
	// Why says why a group was not scored ("" when it was).
	Why string
	// Timed reports whether every run of the group records when its first
	// call was made (a split by time is then one).
	Timed bool
}

// Split is how one corpus is divided into training and test runs.
type Split string

// The splits Calibrate's callers offer.
const (
	// SplitTime trains on each group's earlier half and tests on its
	// later half, by the time of the run's first call (file order where no
	// time is recorded): the forecast is used on runs after its history.
	SplitTime Split = "time"
	// SplitAlternate trains on every other run of each group.
	SplitAlternate Split = "alternate"
)

// SplitRuns divides a corpus's runs, per system and model, into training
// and test runs.
func SplitRuns(runs []replay.Run, how Split) (train, test []replay.Run, err error) {
	if how != SplitTime && how != SplitAlternate {
		return nil, nil, fmt.Errorf("split %q: want %q or %q", how, SplitTime, SplitAlternate)
	}
	for _, g := range groupRuns(runs) {
		if how == SplitTime {
			sort.SliceStable(g.runs, func(i, j int) bool { return firstCall(g.runs[i]).Before(firstCall(g.runs[j])) })
			half := len(g.runs) / 2
			train, test = append(train, g.runs[:half]...), append(test, g.runs[half:]...)
			continue
		}
		even, odd := alternate(g.runs)
		train, test = append(train, even...), append(test, odd...)
	}
	return train, test, nil
}

// alternate deals xs into two halves, every other one: the first, third,
// … and the second, fourth, ….
func alternate[T any](xs []T) (even, odd []T) {
	for i, x := range xs {
		if i%2 == 0 {
			even = append(even, x)
		} else {
			odd = append(odd, x)
		}
	}
	return even, odd
}

// firstCall is when a run's first call was made; the zero time (sorted
// first, stably: file order kept) when not recorded.
func firstCall(r replay.Run) time.Time {
	for _, c := range r.Calls {
		if !c.At.IsZero() {
			return c.At
		}
	}
	return time.Time{}
}

type runGroup struct {
	system, model string
	runs          []replay.Run
}

func groupRuns(runs []replay.Run) []*runGroup {
	byKey := map[[2]string]*runGroup{}
	var out []*runGroup
	for _, r := range runs {
		k := [2]string{r.System, r.Model}
		g := byKey[k]
		if g == nil {
			g = &runGroup{system: r.System, model: r.Model}
			byKey[k] = g
			out = append(out, g)
		}
		g.runs = append(g.runs, r)
	}
	return out
}

// Calibrate fits the spend forecast on train and scores it on test, per
// system and model. The forecast reads every training run of a group and
// its intervals are corrected by cross-conformal prediction over periods
// (Folds: contiguous blocks in time order, see foldSamples), so the
// correction is learned on runs of periods the fit never saw — the shift a
// forecast meets on runs after its history. A test group with no training
// runs is reported unscored. The adaptive forecast is scored beside it on
// the test runs in time order.
func Calibrate(prices *pricing.Catalogue, train, test []replay.Run, opts forecast.Options) []Calibration {
	opts.Unit = forecast.USDUnit
	return calibrate(prices, train, test, opts, budget.Money, usdOf)
}

// CalibrateTokens is Calibrate for the forecast of the final tokens. It
// reads every run whose tokens are known, priced or not.
func CalibrateTokens(prices *pricing.Catalogue, train, test []replay.Run, opts forecast.Options) []Calibration {
	opts.Unit = forecast.TokensUnit
	return calibrate(prices, train, test, opts, budget.Tokens, tokensOf)
}

// measure reads what is forecast from a run's figures; false when it is
// unknown.
type measure[A forecast.Amount] func(runFigures) (A, bool)

func usdOf(f runFigures) (budget.USD, bool) { return f.usd, f.usdOK }

// tokensOf is a run's tokens. A run whose money is known only in part
// (some calls unpriced) still says its tokens in full; none at all means
// the record has no usage, not a run that used nothing.
func tokensOf(f runFigures) (int64, bool) { return f.tokens, f.tokens > 0 }

func calibrate[A forecast.Amount](prices *pricing.Catalogue, train, test []replay.Run, opts forecast.Options, metric budget.Metric, pick measure[A]) []Calibration {
	trained := map[[2]string]*runGroup{}
	for _, g := range groupRuns(train) {
		trained[[2]string{g.system, g.model}] = g
	}
	var out []Calibration
	for _, g := range groupRuns(test) {
		c := Calibration{System: g.system, Model: g.model, Metric: metric, Timed: true}
		for _, r := range g.runs {
			c.Timed = c.Timed && !firstCall(r).IsZero()
		}
		ordered := append([]replay.Run(nil), g.runs...)
		sort.SliceStable(ordered, func(i, j int) bool { return firstCall(ordered[i]).Before(firstCall(ordered[j])) })
		testSamples, unpriced := samplesOf(prices, ordered, pick)
		c.Test, c.Unpriced = len(testSamples), unpriced
		tg := trained[[2]string{g.system, g.model}]
		if tg == nil {
			c.Why = "no training runs of this system and model"
			out = append(out, c)
			continue
		}
		folds, unpricedTrain := foldsOf(prices, tg.runs, pick)
		c.Unpriced += unpricedTrain
		var all []forecast.Sample[A]
		for _, f := range folds {
			all = append(all, f...)
		}
		c.Fit, c.Folds = len(all), len(folds)
		c.Raw = asInt64(forecast.Fit(all, opts).Evaluate(testSamples))
		m := forecast.FitCross(folds, opts)
		minReached := cmp.Or(opts.MinReached, forecast.DefaultMinReached)
		switch {
		case len(all) < minReached:
			c.Why = fmt.Sprintf("too few training runs: %d fitted, a forecast needs %d that got as far", len(all), minReached)
		case m.Calibrated() == 0:
			c.Why = "too few runs outside each period to correct the intervals on"
		}
		c.Calibrated = asInt64(m.Evaluate(testSamples))
		c.Adaptive = asInt64(forecast.NewOnline(folds, opts, 0).EvaluateOnline(testSamples))
		out = append(out, c)
	}
	return out
}

// asInt64 is a score with its amounts as plain integers (nano-dollars, or
// tokens), so that one Calibration type carries either metric.
func asInt64[A forecast.Amount](s forecast.Score[A]) forecast.Score[int64] {
	return forecast.Score[int64]{Runs: s.Runs, Checkpoints: s.Checkpoints, Skipped: s.Skipped, Covered: s.Covered,
		Coverage: s.Coverage, CoverageSE: s.CoverageSE, MedianRelError: s.MedianRelError, MedianAbsError: int64(s.MedianAbsError),
		Brier: s.Brier, BrierN: s.BrierN}
}

// samplesOf are the runs whose measure is known, as the forecast reads
// them, and how many were left out for an unknown one.
func samplesOf[A forecast.Amount](prices *pricing.Catalogue, runs []replay.Run, pick measure[A]) ([]forecast.Sample[A], int) {
	var out []forecast.Sample[A]
	unknown := 0
	for _, r := range runs {
		v, ok := pick(figures(prices, r))
		if !ok {
			unknown++
			continue
		}
		out = append(out, forecast.Sample[A]{Final: v, Solved: r.Resolved})
	}
	return out, unknown
}

// crossFolds is how many folds a history is cut into for the
// cross-conformal correction: the usual ten, not tuned on any corpus.
const crossFolds = 10

// foldsOf are the runs whose measure is known, as the forecast reads
// them, in time order (of their first call; file order where none is
// recorded) cut into crossFolds contiguous blocks: each block's runs are
// then corrected by a forecast fitted on the other periods, so the
// correction holds a shift between periods (and, in a corpus kept by
// repository, between repositories), which a correction read from runs
// dealt alternately cannot see. The second result is how many runs were
// left out, their measure unknown.
func foldsOf[A forecast.Amount](prices *pricing.Catalogue, runs []replay.Run, pick measure[A]) ([][]forecast.Sample[A], int) {
	ordered := append([]replay.Run(nil), runs...)
	sort.SliceStable(ordered, func(i, j int) bool { return firstCall(ordered[i]).Before(firstCall(ordered[j])) })
	all, unknown := samplesOf(prices, ordered, pick)
	var folds [][]forecast.Sample[A]
	for i := range crossFolds {
		if fold := all[i*len(all)/crossFolds : (i+1)*len(all)/crossFolds]; len(fold) > 0 {
			folds = append(folds, fold)
		}
	}
	return folds, unknown
}

// FitForecast fits a spend forecast on runs, the model a live forecast
// uses: its intervals corrected by cross-conformal prediction over the
// earlier periods (foldsOf), then adapted to each later run in the order
// they ran (forecast.FitAdaptive) — the method Calibrate's adaptive column
// measures. Runs whose spend is unknown, wholly or in part, are left out: a
// partial spend is a lower bound, and a final spend read low would pull
// every interval down with it.
func FitForecast(prices *pricing.Catalogue, runs []replay.Run, opts forecast.Options) *forecast.Model[budget.USD] {
	opts.Unit = forecast.USDUnit
	folds, _ := foldsOf(prices, runs, usdOf)
	return forecast.FitAdaptive(folds, opts)
}

// FitTokensForecast is FitForecast for the final tokens: it reads every
// run whose tokens are known, including those whose money is known only in
// part.
func FitTokensForecast(prices *pricing.Catalogue, runs []replay.Run, opts forecast.Options) *forecast.Model[int64] {
	opts.Unit = forecast.TokensUnit
	folds, _ := foldsOf(prices, runs, tokensOf)
	return forecast.FitAdaptive(folds, opts)
}

// Pooled sums the scores of several groups (coverage and Brier weighted by
// checkpoints, coverage's standard error from the groups' as independent;
// the median errors are not poolable and are left zero).
func Pooled(cs []Calibration, pick func(Calibration) forecast.Score[int64]) forecast.Score[int64] {
	var p forecast.Score[int64]
	var brier, variance float64
	for _, c := range cs {
		s := pick(c)
		variance += math.Pow(s.CoverageSE*float64(s.Checkpoints), 2)
		p.Runs += s.Runs
		p.Checkpoints += s.Checkpoints
		p.Skipped += s.Skipped
		p.Covered += s.Covered
		brier += s.Brier * float64(s.BrierN)
		p.BrierN += s.BrierN
	}
	if p.Checkpoints > 0 {
		p.Coverage = float64(p.Covered) / float64(p.Checkpoints)
		p.CoverageSE = math.Sqrt(variance) / float64(p.Checkpoints) // the groups are independent
	}
	if p.BrierN > 0 {
		p.Brier = brier / float64(p.BrierN)
	}
	return p
}

// WriteCalibration writes the calibration of each group, and all groups
// pooled, as a table: cs are of one metric.
func WriteCalibration(w io.Writer, cs []Calibration, coverage float64, split Split) error {
	tokens := len(cs) > 0 && cs[0].Metric == budget.Tokens
	if tokens {
		fmt.Fprintf(w, "Tokens forecast calibration: %.0f %% intervals of the final tokens, scored at every checkpoint\n", coverage*100)
		fmt.Fprintf(w, "(nothing used, then 10k, 20k, 40k, … tokens that each test run passed) on runs the forecast never saw.\n")
	} else {
		fmt.Fprintf(w, "Spend forecast calibration: %.0f %% intervals of the final spend, scored at every checkpoint\n", coverage*100)
		fmt.Fprintf(w, "(nothing spent, then $0.01, $0.02, $0.04, … that each test run passed) on runs the forecast never saw.\n")
	}
	fmt.Fprintf(w, "Adaptive: the same start, learning from each test run once it ended, in time order (adaptive conformal, step %g).\n\n", forecast.DefaultAdaptRate)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tmodel\truns fit/test, folds\tforecasts\tcoverage raw\tcoverage calibrated (95 % CI)\tcoverage adaptive (95 % CI)\tmedian error\tBrier P(solved)\t")
	for _, c := range cs {
		if c.Why != "" && c.Calibrated.Checkpoints == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%d/%d, %d\t0\t-\t-\t-\t-\t-\t%s\n", c.System, c.Model, c.Fit, c.Test, c.Folds, c.Why)
			continue
		}
		s := c.Calibrated
		note := c.Why
		if split == SplitTime && !c.Timed {
			note = "no call times recorded: split in file order"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d, %d\t%d\t%.1f %%\t%s\t%s\t%.0f %% (%s)\t%s\t%s\n", c.System, c.Model, c.Fit, c.Test, c.Folds,
			s.Checkpoints, c.Raw.Coverage*100, withCI(s), withCI(c.Adaptive), s.MedianRelError*100, amountText(c.Metric, s.MedianAbsError), brier(s), note)
	}
	raw := Pooled(cs, func(c Calibration) forecast.Score[int64] { return c.Raw })
	cal := Pooled(cs, func(c Calibration) forecast.Score[int64] { return c.Calibrated })
	ada := Pooled(cs, func(c Calibration) forecast.Score[int64] { return c.Adaptive })
	fmt.Fprintf(tw, "all\t\t\t%d\t%.1f %%\t%s\t%s\t\t%s\t\n", cal.Checkpoints, raw.Coverage*100, withCI(cal), withCI(ada), brier(cal))
	if err := tw.Flush(); err != nil {
		return err
	}
	unknown, skipped := 0, 0
	for _, c := range cs {
		unknown += c.Unpriced
		skipped += c.Calibrated.Skipped
	}
	what := "their spend unknown (wholly or in part)"
	if tokens {
		what = "their tokens unknown"
	}
	_, err := fmt.Fprintf(w, "\n%d checkpoints had too little history to forecast (no number made up); %d runs left out, %s.\n", skipped, unknown, what)
	return err
}

// amountText is an amount of metric as a table says it: money to the cent,
// tokens as purser.TokensText.
func amountText(m budget.Metric, v int64) string {
	if m == budget.Tokens {
		return purser.TokensText(v)
	}
	return cents(budget.USD(v)).String()
}

// withCI is a coverage with its 95 % confidence half-width (1.96 standard
// errors, the runs as the draws): "79.6 % ± 2.1".
func withCI(s forecast.Score[int64]) string {
	return fmt.Sprintf("%.1f %% ± %.1f", s.Coverage*100, 1.96*s.CoverageSE*100)
}

func brier(s forecast.Score[int64]) string {
	if s.BrierN == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", s.Brier)
}

// cents rounds an amount to the cent for a table.
func cents(u budget.USD) budget.USD {
	const cent = budget.NanosPerDollar / 100
	return (u + cent/2) / cent * cent
}
