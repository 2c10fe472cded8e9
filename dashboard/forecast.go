package dashboard

import (
	"context"

	"github.com/purser-dev/purser"
)

// Forecaster gives a task's spend forecast (docs/forecast.md), nil when it
// has none (DONE, or unknown). It is called for every task on every
// snapshot, so it must be cheap: the wiring reads the history behind it
// once in a while, not each time.
type Forecaster func(ctx context.Context, taskID string) *purser.SpendForecast

// addForecasts sets the forecast of each task of snap that is not DONE.
func addForecasts(ctx context.Context, snap *Snapshot, f Forecaster) {
	if f == nil {
		return
	}
	for i := range snap.Runs {
		for j := range snap.Runs[i].Tasks {
			tv := &snap.Runs[i].Tasks[j]
			if tv.State == string(purser.StateDone) {
				continue
			}
			if fc := f(ctx, tv.ID); fc != nil {
				tv.Forecast, tv.ForecastText = fc, fc.String()
			}
		}
	}
}
