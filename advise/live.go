package advise

import (
	"fmt"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/forecast"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
)

// Forecaster is a fitted spend forecast as the engine asks it: a
// purser.SpendForecaster saying where its history came from.
type Forecaster struct {
	Model *forecast.Model[budget.USD]
	// Tokens forecasts the final tokens (nil: no tokens forecast); it is
	// fitted on more runs than Model when some runs' money is unknown.
	Tokens *forecast.Model[int64]
	Source string // e.g. "this project's database: 42 finished runs of claude-sonnet-4-5"
}

var (
	_ purser.SpendForecaster  = Forecaster{}
	_ purser.TokensForecaster = Forecaster{}
)

// ForecastTokens forecasts the final tokens of a task that has used used.
func (f Forecaster) ForecastTokens(used int64) purser.TokensForecast {
	if f.Tokens == nil {
		return purser.TokensForecast{Used: used, Why: f.Source}
	}
	g := f.Tokens.Forecast(used)
	// To the thousand, outward, as money is to the cent.
	const k = 1000
	if g.OK {
		g.Median = (g.Median + k/2) / k * k
		g.Low = max(g.Low/k*k, min(used, g.Low))
		g.High = (g.High + k - 1) / k * k
	}
	tf := forecast.Tokens(g)
	tf.Runs = f.Tokens.Runs()
	return tf
}

// ForecastSpend forecasts the final spend of a task that has spent spent.
func (f Forecaster) ForecastSpend(spent budget.USD) purser.SpendForecast {
	if f.Model == nil {
		return purser.SpendForecast{Spent: spent, Why: f.Source, Source: f.Source}
	}
	g := f.Model.Forecast(spent)
	// To the cent, outward: the interval is an estimate, and nano-dollars
	// would claim a precision it does not have.
	const cent = budget.NanosPerDollar / 100
	if g.OK {
		g.Median = (g.Median + cent/2) / cent * cent
		g.Low = max(g.Low/cent*cent, min(spent, g.Low))
		g.High = (g.High + cent - 1) / cent * cent
	}
	sf := forecast.Spend(g)
	sf.Runs, sf.Source = f.Model.Runs(), f.Source
	return sf
}

// NoForecaster is a forecaster that forecasts nothing and says why (a
// corpus that could not be read): a task runs without a forecast rather
// than not at all.
func NoForecaster(why string) Forecaster { return Forecaster{Source: why} }

// LiveForecaster fits the forecast a running task uses from history: the
// finished runs (labelled solved or not) of model, or, when the history has
// none of that model and allOtherwise is set, all its finished runs (the
// source then says so: runs of other systems forecast this one poorly).
// from names the history for the source line. The money forecast reads the
// runs whose spend is known in full, the tokens forecast every run whose
// tokens are known.
func LiveForecaster(prices *pricing.Catalogue, runs []replay.Run, model, from string, allOtherwise bool) Forecaster {
	return LiveForecasterOf(prices, runs, runs, model, from, allOtherwise)
}

// LiveForecasterOf is LiveForecaster with the money forecast fitted on
// moneyRuns and the tokens forecast on tokenRuns: a history that knows
// which of its runs' money is known only in part (a Purser database) leaves
// them out of moneyRuns, where their tokens, read as a totals-only run's,
// would be priced anew.
func LiveForecasterOf(prices *pricing.Catalogue, moneyRuns, tokenRuns []replay.Run, model, from string, allOtherwise bool) Forecaster {
	money, what := finishedOf(moneyRuns, model, from, allOtherwise)
	tokens, _ := finishedOf(tokenRuns, model, from, allOtherwise)
	return Forecaster{Model: FitForecast(prices, money, forecast.Options{}), Tokens: FitTokensForecast(prices, tokens, forecast.Options{}), Source: what}
}

// finishedOf are the finished runs of model in runs (all finished runs
// when none is of model and allOtherwise is set), and the source line
// saying so.
func finishedOf(runs []replay.Run, model, from string, allOtherwise bool) ([]replay.Run, string) {
	var same, finished []replay.Run
	for _, r := range runs {
		if r.Resolved == nil {
			continue // still running, or interrupted: its final spend is not known
		}
		finished = append(finished, r)
		if r.Model == model {
			same = append(same, r)
		}
	}
	if len(same) == 0 && allOtherwise {
		return finished, fmt.Sprintf("%s: %d finished runs, none of %s (all models pooled)", from, len(finished), model)
	}
	return same, fmt.Sprintf("%s: %d finished runs of %s", from, len(same), model)
}
