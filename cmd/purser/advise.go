package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/advise"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/forecast"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

// adviseFlags are advise's flags.
type adviseFlags struct {
	pricingPath, db, plot  string
	asJSON, fromDB         bool
	calibrate, test, split string
	metric                 string
}

func newAdviseCmd() *cobra.Command {
	var fl adviseFlags
	cmd := &cobra.Command{
		Use:   "advise (CORPUS.jsonl | --from-db) [--plot FILE.svg] | --calibrate TRAIN.jsonl [--test TEST.jsonl | --split time|alternate] [--metric money|tokens]",
		Short: "Propose budgets from recorded runs, with the trade-off of candidate hard caps",
		Long: `Proposes optimal / warning / hard per metric for each system and model in the
history: optimal near the median of solved runs, warning near their 75th
percentile, hard near their 95th. For a handful of candidate hard caps it shows,
replayed with admission, the money saved against the solved runs cut; then a
chart of the distribution, and the proposal as a budget. --plot writes the
distribution of solved and unsolved runs with the proposed lines as SVG.

--calibrate checks the spend forecast instead: fitted on the runs of TRAIN
(or of the database, with --from-db), its intervals corrected on periods of
TRAIN held out in turn (cross-conformal), and scored on TEST — or, without
--test, on TRAIN split by --split (time: each system's later half is the
test) — it prints how often the 80 % interval held the final spend, and the
median's error, per system and model; beside it, the same forecast learning
from each test run once it ended, in time order (adaptive). --metric tokens
checks the forecast of the final tokens instead (every run whose tokens are
known, priced or not).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runAdvise(cmd, fl, args) },
	}
	cmd.Flags().StringVar(&fl.pricingPath, "pricing", "", "prices in LiteLLM's format, for calls with no recorded cost")
	cmd.Flags().BoolVar(&fl.fromDB, "from-db", false, "advise from Purser's own history instead of a corpus")
	cmd.Flags().StringVar(&fl.db, "db", "", "database path, with --from-db")
	cmd.Flags().BoolVar(&fl.asJSON, "json", false, "print {groups: [{system, model, runs, solved, budget, maxIterationsIsDefault, tradeOff}]} as JSON")
	cmd.Flags().StringVar(&fl.calibrate, "calibrate", "", "check the spend forecast: fit it on this corpus (JSON Lines; \"db\" for --from-db)")
	cmd.Flags().StringVar(&fl.test, "test", "", "with --calibrate: score the forecast on this corpus")
	cmd.Flags().StringVar(&fl.split, "split", string(advise.SplitTime), "with --calibrate and no --test: how to split the corpus (time or alternate)")
	cmd.Flags().StringVar(&fl.metric, "metric", "money", "with --calibrate: the forecast to check (money or tokens)")
	cmd.Flags().StringVar(&fl.plot, "plot", "", "write the distribution with the proposed lines to this SVG file")
	return cmd
}

// runAdvise is advise: the proposal per group, in text or JSON, and the
// plot; or, with --calibrate, the forecast's calibration.
func runAdvise(cmd *cobra.Command, fl adviseFlags, args []string) error {
	prices, err := loadPrices(fl.pricingPath)
	if err != nil {
		return badInput(err)
	}
	if fl.calibrate != "" || fl.test != "" {
		return runCalibrate(cmd, prices, fl, args)
	}
	runs, err := loadCorpus(cmd.Context(), args, fl.fromDB, fl.db)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return badInput(fmt.Errorf("no runs to advise from"))
	}
	groups, err := advise.Advise(prices, runs)
	if err != nil {
		return err
	}
	if !fl.asJSON {
		if err := writeAdvice(cmd, prices, runs, groups, fl); err != nil {
			return err
		}
	}
	if fl.plot != "" {
		if err := writePlot(fl.plot, groups); err != nil {
			return err
		}
		if !fl.asJSON {
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", fl.plot)
		}
	}
	if fl.asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(adviceJSON(groups, func(g advise.Group) (*advise.TriggerComparison, *advise.Overshoot) {
			return triggerOf(prices, runs, g)
		}))
	}
	return nil
}

// writeAdvice writes each group's advice as text, the forecast trigger
// beside it, and what can be said of stuck runs.
func writeAdvice(cmd *cobra.Command, prices *pricing.Catalogue, runs []replay.Run, groups []advise.Group, fl adviseFlags) error {
	for _, g := range groups {
		if err := advise.WriteText(cmd.OutOrStdout(), g); err != nil {
			return err
		}
		if err := writeTrigger(cmd, prices, runs, g); err != nil {
			return err
		}
	}
	// Stuck runs (stuckAfter) are told apart by validator results, which
	// only Purser's own history records.
	stuck := "this corpus records no validator results per iteration, so a stuck run cannot be told from it"
	if fl.fromDB {
		var err error
		if stuck, err = stuckInDB(cmd, fl.db); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "\nstuck runs (stuckAfter): %s\n", stuck)
	return err
}

// writePlot writes the groups' distributions as SVG to path.
func writePlot(path string, groups []advise.Group) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := advise.WriteSVG(f, groups); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// adviceGroupJSON is one group's advice as advise --json prints it; the
// proposed budget's maxIterations is a default (advise.DefaultMaxIterations),
// not read from the runs, and says so.
type adviceGroupJSON struct {
	System                 string                `json:"system"`
	Model                  string                `json:"model"`
	Runs                   int                   `json:"runs"`
	Solved                 int                   `json:"solved"`
	TooFew                 bool                  `json:"tooFew"`
	TotalsOnly             bool                  `json:"totalsOnly"`
	Basis                  string                `json:"basis"`
	Budget                 *budget.Config        `json:"budget"` // null when TooFew
	MaxIterationsIsDefault bool                  `json:"maxIterationsIsDefault"`
	TradeOff               []adviceCandidateJSON `json:"tradeOff"`
	// ForecastTrigger and FinishCallOvershoot are null when the group has
	// no money figures (or too few runs).
	ForecastTrigger     *advise.TriggerComparison `json:"forecastTrigger"`
	FinishCallOvershoot *advise.Overshoot         `json:"finishCallOvershoot"`
}

// adviceCandidateJSON is one hard cap of the trade-off, in its metric's
// unit (dollars exact, as a decimal, for money).
type adviceCandidateJSON struct {
	Basis     string      `json:"basis"`
	Metric    string      `json:"metric"`
	Cap       json.Number `json:"cap"`
	Stopped   int         `json:"stopped"`
	SolvedCut int         `json:"solvedCut"`
	SavedUSD  budget.USD  `json:"savedUsd"`
	SpentUSD  budget.USD  `json:"spentUsd"`
}

func adviceJSON(groups []advise.Group, trigger func(advise.Group) (*advise.TriggerComparison, *advise.Overshoot)) any {
	out := []adviceGroupJSON{}
	for _, g := range groups {
		j := adviceGroupJSON{System: g.System, Model: g.Model, Runs: g.Runs, Solved: g.Solved, TooFew: g.TooFew, TotalsOnly: g.TotalsOnly, Basis: g.Basis, TradeOff: []adviceCandidateJSON{}}
		if !g.TooFew && len(g.Proposals) > 0 {
			cfg := advise.Config(g.Proposals, advise.DefaultMaxIterations)
			j.Budget, j.MaxIterationsIsDefault = &cfg, true
		}
		for _, c := range g.TradeOff {
			if len(g.Proposals) == 0 {
				break
			}
			metric := g.Proposals[0].Metric
			capValue := json.Number(fmt.Sprint(c.Cap))
			if metric == budget.Money {
				capValue = json.Number(budget.USD(c.Cap).Decimal())
			}
			j.TradeOff = append(j.TradeOff, adviceCandidateJSON{Basis: c.Basis, Metric: metric.String(), Cap: capValue, Stopped: c.Stopped, SolvedCut: c.SolvedCut, SavedUSD: c.SavedUSD, SpentUSD: c.SpentUSD})
		}
		j.ForecastTrigger, j.FinishCallOvershoot = trigger(g)
		out = append(out, j)
	}
	return struct {
		Groups []adviceGroupJSON `json:"groups"`
	}{out}
}

// runCalibrate is advise --calibrate: the forecast fitted on one corpus and
// scored on another (or on a split of the first).
func runCalibrate(cmd *cobra.Command, prices *pricing.Catalogue, fl adviseFlags, args []string) error {
	if len(args) > 0 {
		return badInput(fmt.Errorf("with --calibrate, give the corpora as --calibrate and --test, not as an argument"))
	}
	trainPath, testPath, split := fl.calibrate, fl.test, fl.split
	if fl.metric != "money" && fl.metric != "tokens" {
		return badInput(fmt.Errorf("--metric: want money or tokens, got %q", fl.metric))
	}
	if trainPath == "" {
		return badInput(fmt.Errorf("--test needs --calibrate TRAIN.jsonl (the runs the forecast is fitted on)"))
	}
	var train []replay.Run
	var err error
	if trainPath == "db" && fl.fromDB {
		train, err = loadCorpus(cmd.Context(), nil, true, fl.db)
	} else {
		train, err = loadCorpus(cmd.Context(), []string{trainPath}, false, "")
	}
	if err != nil {
		return err
	}
	var test []replay.Run
	if testPath != "" {
		if test, err = loadCorpus(cmd.Context(), []string{testPath}, false, ""); err != nil {
			return err
		}
	} else if train, test, err = advise.SplitRuns(train, advise.Split(split)); err != nil {
		return badInput(fmt.Errorf("--split: %w", err))
	}
	if len(train) == 0 || len(test) == 0 {
		return badInput(fmt.Errorf("--calibrate needs runs to fit on and runs to test on (got %d and %d)", len(train), len(test)))
	}
	opts := forecast.Options{Coverage: forecast.DefaultCoverage, MinReached: forecast.DefaultMinReached}
	var cs []advise.Calibration
	switch fl.metric {
	case "money":
		cs = advise.Calibrate(prices, train, test, opts)
	case "tokens":
		cs = advise.CalibrateTokens(prices, train, test, opts)
	default:
		return badInput(fmt.Errorf("--metric: want money or tokens, got %q", fl.metric))
	}
	if fl.asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(calibrationJSON(cs))
	}
	how := advise.Split(split)
	if testPath != "" {
		how = ""
	}
	return advise.WriteCalibration(cmd.OutOrStdout(), cs, opts.Coverage, how)
}

// calibrationJSON is advise --calibrate --json: per group and pooled.
func calibrationJSON(cs []advise.Calibration) any {
	type score struct {
		Forecasts      int         `json:"forecasts"`
		Skipped        int         `json:"skipped"`
		Coverage       float64     `json:"coverage"`
		CoverageSE     float64     `json:"coverageSE"`
		MedianRelError float64     `json:"medianRelError"`
		MedianAbsError *budget.USD `json:"medianAbsErrorUsd,omitempty"`
		MedianAbsTok   *int64      `json:"medianAbsErrorTokens,omitempty"`
		Brier          *float64    `json:"brierSolved"`
	}
	toScore := func(m budget.Metric, s forecast.Score[int64]) score {
		out := score{Forecasts: s.Checkpoints, Skipped: s.Skipped, Coverage: s.Coverage, CoverageSE: s.CoverageSE, MedianRelError: s.MedianRelError}
		if m == budget.Tokens {
			out.MedianAbsTok = &s.MedianAbsError
		} else {
			usd := budget.USD(s.MedianAbsError)
			out.MedianAbsError = &usd
		}
		if s.BrierN > 0 {
			b := s.Brier
			out.Brier = &b
		}
		return out
	}
	type group struct {
		System     string `json:"system"`
		Model      string `json:"model"`
		Fit        int    `json:"fitRuns"`
		Folds      int    `json:"folds"`
		Test       int    `json:"testRuns"`
		Unpriced   int    `json:"unpricedRuns"`
		Raw        score  `json:"raw"`
		Calibrated score  `json:"calibrated"`
		Adaptive   score  `json:"adaptive"`
		Why        string `json:"why,omitempty"`
		Timed      bool   `json:"timed"`
	}
	metric := budget.Money
	if len(cs) > 0 {
		metric = cs[0].Metric
	}
	out := struct {
		Metric budget.Metric `json:"metric"`
		Groups []group       `json:"groups"`
		Pooled struct {
			Raw        score `json:"raw"`
			Calibrated score `json:"calibrated"`
			Adaptive   score `json:"adaptive"`
		} `json:"pooled"`
	}{Metric: metric, Groups: []group{}}
	for _, c := range cs {
		out.Groups = append(out.Groups, group{c.System, c.Model, c.Fit, c.Folds, c.Test, c.Unpriced,
			toScore(metric, c.Raw), toScore(metric, c.Calibrated), toScore(metric, c.Adaptive), c.Why, c.Timed})
	}
	pooled := func(pick func(advise.Calibration) forecast.Score[int64]) score {
		return toScore(metric, advise.Pooled(cs, pick))
	}
	out.Pooled.Raw = pooled(func(c advise.Calibration) forecast.Score[int64] { return c.Raw })
	out.Pooled.Calibrated = pooled(func(c advise.Calibration) forecast.Score[int64] { return c.Calibrated })
	out.Pooled.Adaptive = pooled(func(c advise.Calibration) forecast.Score[int64] { return c.Adaptive })
	return out
}

// writeTrigger writes, after a group's advice, the forecast trigger beside
// the plain warning line at the proposed hard money cap, and the overshoot
// of onHard: finish-call.
func writeTrigger(cmd *cobra.Command, prices *pricing.Catalogue, runs []replay.Run, g advise.Group) error {
	if g.TooFew {
		return nil
	}
	tc, o := triggerOf(prices, runs, g)
	if tc == nil {
		_, err := fmt.Fprintln(cmd.OutOrStdout(), "  forecast trigger and finish-call: no money figures in this group")
		return err
	}
	return advise.WriteTrigger(cmd.OutOrStdout(), *tc, *o)
}

// triggerOf scores the forecast trigger at the group's proposed hard money
// cap and reads finish-call's overshoot from its runs; nil, nil when the
// group has no money proposal.
func triggerOf(prices *pricing.Catalogue, runs []replay.Run, g advise.Group) (*advise.TriggerComparison, *advise.Overshoot) {
	var money *advise.Proposal
	for i := range g.Proposals {
		if g.Proposals[i].Metric == budget.Money {
			money = &g.Proposals[i]
		}
	}
	if g.TooFew || money == nil {
		return nil, nil
	}
	var mine []replay.Run
	for _, r := range runs {
		if r.System == g.System && r.Model == g.Model {
			mine = append(mine, r)
		}
	}
	tc := advise.CompareTrigger(prices, mine, budget.USD(money.Hard), budget.USD(money.Optimal))
	o := advise.FinishCallOvershoot(prices, mine, g.Model)
	return &tc, &o
}

// stuckInDB counts the tasks of the database that ended stuck (stuckAfter).
func stuckInDB(cmd *cobra.Command, db string) (string, error) {
	a, err := app.Open(cmd.Context(), app.Options{DB: db})
	if err != nil {
		return "", err
	}
	defer a.Close()
	tasks, err := a.Store.Tasks(cmd.Context())
	if err != nil {
		return "", err
	}
	n := 0
	for _, t := range tasks {
		if t.State == purser.StateBlocked && strings.HasPrefix(t.Reason, "stuck:") {
			n++
		}
	}
	return fmt.Sprintf("%d of the database's %d tasks ended stuck", n, len(tasks)), nil
}
