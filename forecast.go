package purser

import (
	"fmt"
	"strings"

	"github.com/purser-dev/purser/budget"
)

// EventForecast: the task's spend forecast was updated (after every call);
// the message says it in one line.
const EventForecast EventType = "forecast"

// SpendForecast is what a task will likely have spent when it ends, read
// from the history of runs like it that got as far (package forecast).
// Without enough history OK is false, Why says so, and the figures are
// zero: no number is made up.
type SpendForecast struct {
	OK  bool   `json:"ok"`
	Why string `json:"why,omitempty"`
	// Spent is the spend the forecast is conditioned on.
	Spent budget.USD `json:"spentUsd"`
	// Median, Low and High are the median and the interval of the final
	// spend; Coverage the share of runs the interval is meant to hold.
	Median   budget.USD `json:"medianUsd"`
	Low      budget.USD `json:"lowUsd"`
	High     budget.USD `json:"highUsd"`
	Coverage float64    `json:"coverage"`
	// Calibrated is false when the interval had no conformal correction.
	Calibrated bool `json:"calibrated"`
	// PSolved is the share of the Labelled past runs that got this far
	// and were solved (Labelled 0: unknown).
	PSolved  float64 `json:"pSolved"`
	Labelled int     `json:"labelled"`
	// Reached is how many past runs got this far, of the Runs the
	// forecast reads (every finished run of the history; they also
	// calibrate its interval, cross-conformal).
	Reached int `json:"reached"`
	Runs    int `json:"runs"`
	// Source says which history it was read from.
	Source string `json:"source,omitempty"`
	// Tokens is the forecast of the task's final tokens, made the same
	// way, for a task capped on tokens or whose money is unknown (a
	// backend that reports no USD); nil otherwise.
	Tokens *TokensForecast `json:"tokens,omitempty"`
}

// TokensForecast is what a task will likely have used in tokens when it
// ends: SpendForecast's method, on tokens. Without enough history OK is
// false and Why says so.
type TokensForecast struct {
	OK  bool   `json:"ok"`
	Why string `json:"why,omitempty"`
	// Used is the tokens the forecast is conditioned on; Median, Low and
	// High those of the final tokens, Coverage the share the interval
	// is meant to hold.
	Used       int64   `json:"usedTokens"`
	Median     int64   `json:"medianTokens"`
	Low        int64   `json:"lowTokens"`
	High       int64   `json:"highTokens"`
	Coverage   float64 `json:"coverage"`
	Calibrated bool    `json:"calibrated"`
	// PSolved, Labelled, Reached and Runs are as in SpendForecast, for
	// the runs that used at least Used tokens.
	PSolved  float64 `json:"pSolved"`
	Labelled int     `json:"labelled"`
	Reached  int     `json:"reached"`
	Runs     int     `json:"runs"`
}

// Headline is the tokens forecast's figures alone: "forecast to finish
// 1.20M tokens (80 %: 800k–2.10M)".
func (f TokensForecast) Headline() string {
	return fmt.Sprintf("forecast to finish %s tokens (%.0f %%: %s–%s)", TokensText(f.Median), f.Coverage*100, TokensText(f.Low), TokensText(f.High))
}

// String says the tokens forecast in one line, as SpendForecast.String
// says money's, or why there is none.
func (f TokensForecast) String() string {
	if !f.OK {
		return "no tokens forecast: " + f.Why
	}
	return sayForecast(f.Headline(), f.Calibrated, f.Labelled > 0, TokensText(f.Used)+" tokens", f.PSolved)
}

// sayForecast is a forecast's line: its headline, "uncalibrated" when it
// is, and the share of past runs solved that reached where this one is,
// when past runs say so (labelled).
func sayForecast(headline string, calibrated, labelled bool, reached string, pSolved float64) string {
	s := headline
	if !calibrated {
		s += ", uncalibrated"
	}
	if labelled {
		s += fmt.Sprintf("; of past runs that reached %s, %.0f %% were solved", reached, pSolved*100)
	}
	return s
}

// TokensText is a count of tokens as the forecast says it: exact under
// ten thousand, else in thousands ("12.5k", "800k") or millions ("1.20M").
// The JSON carries the exact figures.
func TokensText(n int64) string {
	switch {
	case n < 10_000:
		return fmt.Sprintf("%d", n)
	case n < 100_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	case n < 1_000_000:
		return fmt.Sprintf("%.0fk", float64(n)/1e3)
	}
	return fmt.Sprintf("%.2fM", float64(n)/1e6)
}

// String says the forecast the way STATUS.md, the live view and alerts say
// it: "forecast to finish $1.40 (80 %: $0.90–$2.60); of past runs that
// reached $0.80, 31 % were solved", or why there is none.
func (f SpendForecast) String() string {
	if f.Tokens != nil {
		return f.withTokens(*f.Tokens)
	}
	return f.moneyString()
}

// withTokens says the money forecast and the tokens forecast t in one
// line: both figures when both are known (P(solved) once, money's), the
// tokens' alone, with why money has none, when only they are.
func (f SpendForecast) withTokens(t TokensForecast) string {
	switch {
	case f.OK && t.OK:
		s := f.Headline() + " and " + strings.TrimPrefix(t.Headline(), "forecast to finish ")
		if !f.Calibrated || !t.Calibrated {
			s += ", uncalibrated"
		}
		if f.Labelled > 0 {
			s += fmt.Sprintf("; of past runs that reached %s, %.0f %% were solved", f.Spent, f.PSolved*100)
		}
		return s
	case t.OK:
		return t.String() + " (no money forecast: " + f.Why + ")"
	case f.OK:
		return f.moneyString() + " (no tokens forecast: " + t.Why + ")"
	case f.Why == t.Why:
		return "no forecast: " + f.Why
	}
	return "no forecast: " + f.Why + "; no tokens forecast: " + t.Why
}

// moneyString is String for the money forecast alone.
func (f SpendForecast) moneyString() string {
	if !f.OK {
		return "no forecast: " + f.Why
	}
	return sayForecast(f.Headline(), f.Calibrated, f.Labelled > 0, f.Spent.String(), f.PSolved)
}

// Headline is the forecast's figures alone: "forecast to finish $1.40
// (80 %: $0.90–$2.60)".
func (f SpendForecast) Headline() string {
	return fmt.Sprintf("forecast to finish %s (%.0f %%: %s–%s)", f.Median, f.Coverage*100, f.Low, f.High)
}

// SpendForecaster forecasts a task's final spend from what it has spent.
// Implementations are fitted once, on history, and are safe for concurrent
// use.
type SpendForecaster interface {
	ForecastSpend(spent budget.USD) SpendForecast
}

// TokensForecaster is a SpendForecaster that also forecasts a task's
// final tokens from the tokens it has used (SpendForecast.Tokens).
type TokensForecaster interface {
	ForecastTokens(used int64) TokensForecast
}

// ForecastWarningArtifact is the task artifact in which the engine records
// that the forecast trigger put the task in WARNING (a ForecastWarning,
// JSON): a resumed task is put back in WARNING without its WARNING alert
// being sent a second time.
const ForecastWarningArtifact = "forecast-warning.json"

// ForecastWarning is what ForecastWarningArtifact holds: why the forecast
// trigger fired, and the hard caps it was compared with.
type ForecastWarning struct {
	Why string `json:"why"`
	// Metric is the metric whose forecast passed its hard cap: "money"
	// or "tokens" ("" in a record made before tokens were forecast: money).
	Metric     string      `json:"metric,omitempty"`
	HardUSD    *budget.USD `json:"hardUsd,omitempty"`
	HardTokens *int64      `json:"hardTokens,omitempty"`
}

// Holds reports whether the warning still stands under hard: the same hard
// caps as when it fired. A budget raised (or otherwise changed) since
// re-arms the trigger, which then compares the forecast afresh.
func (w ForecastWarning) Holds(hard budget.HardLimits) bool {
	return samePtr(w.HardUSD, hard.USD) && samePtr(w.HardTokens, hard.Tokens)
}

func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// ForecastAt is f's forecast for a task of budget cfg at totals: the money
// forecast, and the tokens forecast beside it (when f makes one) for a task
// capped on tokens or whose money is not known in full (a backend that
// reports no USD, calls left unpriced). Where no call's money is known the
// money forecast, conditioned on a $0 that means nothing, is replaced by
// why there is none. The engine, status and the dashboard all read it so.
func ForecastAt(f SpendForecaster, cfg budget.Config, totals budget.Totals) SpendForecast {
	sf := f.ForecastSpend(totals.USD)
	tf, ok := f.(TokensForecaster)
	src := totals.USDSource()
	if !ok || (cfg.Hard.Tokens == nil && src != budget.SourceUnknown && src != budget.SourcePartial) {
		return sf
	}
	tok := tf.ForecastTokens(totals.Tokens)
	sf.Tokens = &tok
	if src == budget.SourceUnknown {
		sf = SpendForecast{Why: "this task's spend in money is unknown (no call of it was priced)", Spent: totals.USD,
			Runs: sf.Runs, Source: sf.Source, Tokens: &tok}
	}
	return sf
}
