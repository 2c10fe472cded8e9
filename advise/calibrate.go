package advise

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/forecast"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

// Calibration is how the spend forecast fared for one system and model:
// fitted on its training runs, corrected (cross-conformal, by period)
// on them, and scored on test runs it never saw.
type Calibration struct {
	System, Model string
	// Fit and Test are how many runs each part had; Folds how many
	// periods the fit runs were corrected over; Unpriced how
	// many runs were left out because what they spent is unknown.
	Fit, Folds, Test, Unpriced int
	// Raw is the score of the intervals as read from the fitted runs;
	// Calibrated after the conformal correction.
	Raw, Calibrated forecast.Score
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
// runs is reported unscored.
func Calibrate(prices *pricing.Catalogue, train, test []replay.Run, opts forecast.Options) []Calibration {
	trained := map[[2]string]*runGroup{}
	for _, g := range groupRuns(train) {
		trained[[2]string{g.system, g.model}] = g
	}
	var out []Calibration
	for _, g := range groupRuns(test) {
		c := Calibration{System: g.system, Model: g.model, Timed: true}
		for _, r := range g.runs {
			c.Timed = c.Timed && !firstCall(r).IsZero()
		}
		testSamples, unpriced := samples(prices, g.runs)
		c.Test, c.Unpriced = len(testSamples), unpriced
		tg := trained[[2]string{g.system, g.model}]
		if tg == nil {
			c.Why = "no training runs of this system and model"
			out = append(out, c)
			continue
		}
		folds, unpricedTrain := foldSamples(prices, tg.runs)
		c.Unpriced += unpricedTrain
		var all []forecast.Sample
		for _, f := range folds {
			all = append(all, f...)
		}
		c.Fit, c.Folds = len(all), len(folds)
		c.Raw = forecast.Fit(all, opts).Evaluate(testSamples)
		m := forecast.FitCross(folds, opts)
		minReached := cmp.Or(opts.MinReached, forecast.DefaultMinReached)
		switch {
		case len(all) < minReached:
			c.Why = fmt.Sprintf("too few training runs: %d fitted, a forecast needs %d that got as far", len(all), minReached)
		case m.Calibrated() == 0:
			c.Why = "too few runs outside each period to correct the intervals on"
		}
		c.Calibrated = m.Evaluate(testSamples)
		out = append(out, c)
	}
	return out
}

// samples are the runs whose spend is known, as the forecast reads them,
// and how many were left out for an unknown spend.
func samples(prices *pricing.Catalogue, runs []replay.Run) ([]forecast.Sample, int) {
	var out []forecast.Sample
	unpriced := 0
	for _, r := range runs {
		f := figures(prices, r)
		if !f.usdOK {
			unpriced++
			continue
		}
		out = append(out, forecast.Sample{Final: f.usd, Solved: r.Resolved})
	}
	return out, unpriced
}

// crossFolds is how many folds a history is cut into for the
// cross-conformal correction: the usual ten, not tuned on any corpus.
const crossFolds = 10

// foldSamples are the priced runs as the forecast reads them, in time
// order (of their first call; file order where none is recorded) cut into
// crossFolds contiguous blocks: each block's runs are then corrected by a
// forecast fitted on the other periods, so the correction holds a shift
// between periods (and, in a corpus kept by repository, between
// repositories), which a correction read from runs dealt alternately
// cannot see. The second result is how many runs were left out, unpriced.
func foldSamples(prices *pricing.Catalogue, runs []replay.Run) ([][]forecast.Sample, int) {
	ordered := append([]replay.Run(nil), runs...)
	sort.SliceStable(ordered, func(i, j int) bool { return firstCall(ordered[i]).Before(firstCall(ordered[j])) })
	all, unpriced := samples(prices, ordered)
	var folds [][]forecast.Sample
	for i := range crossFolds {
		if fold := all[i*len(all)/crossFolds : (i+1)*len(all)/crossFolds]; len(fold) > 0 {
			folds = append(folds, fold)
		}
	}
	return folds, unpriced
}

// FitForecast fits a spend forecast on runs, its intervals corrected by
// cross-conformal prediction over periods (foldSamples): the model a live
// forecast uses.
func FitForecast(prices *pricing.Catalogue, runs []replay.Run, opts forecast.Options) *forecast.Model {
	folds, _ := foldSamples(prices, runs)
	return forecast.FitCross(folds, opts)
}

// Pooled sums the scores of several groups (coverage and Brier weighted by
// checkpoints, coverage's standard error from the groups' as independent;
// the median errors are not poolable and are left zero).
func Pooled(cs []Calibration, pick func(Calibration) forecast.Score) forecast.Score {
	var p forecast.Score
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
// pooled, as a table.
func WriteCalibration(w io.Writer, cs []Calibration, coverage float64, split Split) error {
	fmt.Fprintf(w, "Spend forecast calibration: %.0f %% intervals of the final spend, scored at every checkpoint\n", coverage*100)
	fmt.Fprintf(w, "(nothing spent, then $0.01, $0.02, $0.04, … that each test run passed) on runs the forecast never saw.\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tmodel\truns fit/test, folds\tforecasts\tcoverage raw\tcoverage calibrated (95 % CI)\tmedian error\tBrier P(solved)\t")
	for _, c := range cs {
		if c.Why != "" && c.Calibrated.Checkpoints == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%d/%d, %d\t0\t-\t-\t-\t-\t%s\n", c.System, c.Model, c.Fit, c.Test, c.Folds, c.Why)
			continue
		}
		s := c.Calibrated
		note := c.Why
		if split == SplitTime && !c.Timed {
			note = "no call times recorded: split in file order"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d, %d\t%d\t%.1f %%\t%s\t%.0f %% (%s)\t%s\t%s\n", c.System, c.Model, c.Fit, c.Test, c.Folds,
			s.Checkpoints, c.Raw.Coverage*100, withCI(s), s.MedianRelError*100, cents(s.MedianAbsError), brier(s), note)
	}
	raw, cal := Pooled(cs, func(c Calibration) forecast.Score { return c.Raw }), Pooled(cs, func(c Calibration) forecast.Score { return c.Calibrated })
	fmt.Fprintf(tw, "all\t\t\t%d\t%.1f %%\t%s\t\t%s\t\n", cal.Checkpoints, raw.Coverage*100, withCI(cal), brier(cal))
	if err := tw.Flush(); err != nil {
		return err
	}
	unpriced, skipped := 0, 0
	for _, c := range cs {
		unpriced += c.Unpriced
		skipped += c.Calibrated.Skipped
	}
	_, err := fmt.Fprintf(w, "\n%d checkpoints had too little history to forecast (no number made up); %d runs left out, their spend unknown.\n", skipped, unpriced)
	return err
}

// withCI is a coverage with its 95 % confidence half-width (1.96 standard
// errors, the runs as the draws): "79.6 % ± 2.1".
func withCI(s forecast.Score) string {
	return fmt.Sprintf("%.1f %% ± %.1f", s.Coverage*100, 1.96*s.CoverageSE*100)
}

func brier(s forecast.Score) string {
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
