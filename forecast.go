package purser

import (
	"fmt"

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
}

// String says the forecast the way STATUS.md, the live view and alerts say
// it: "forecast to finish $1.40 (80 %: $0.90–$2.60); of past runs that
// reached $0.80, 31 % were solved", or why there is none.
func (f SpendForecast) String() string {
	if !f.OK {
		return "no forecast: " + f.Why
	}
	s := f.Headline()
	if !f.Calibrated {
		s += ", uncalibrated"
	}
	if f.Labelled > 0 {
		s += fmt.Sprintf("; of past runs that reached %s, %.0f %% were solved", f.Spent, f.PSolved*100)
	}
	return s
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
