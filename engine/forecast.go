package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// ForecastResolver returns the spend forecaster for a task (fitted on the
// history of runs like it), or nil when it has none. It is called once per
// task run, before the first call.
type ForecastResolver func(context.Context, purser.Task) purser.SpendForecaster

// forecastState is a task's spend forecast, updated after every call, and
// whether the forecast trigger (warning.forecast) has put it in WARNING.
type forecastState struct {
	f purser.SpendForecaster // nil: no forecast for this task

	mu        sync.Mutex
	last      *purser.SpendForecast
	said      string // the last forecast said (EventForecast): an unchanged one is not said again
	triggered string // why the forecast trigger entered WARNING; "" until it does
}

// startForecast resolves the task's forecaster and makes its first
// forecast, from what it has spent so far (nothing, or a resume's spend).
func (t *taskRun) startForecast(ctx context.Context) {
	t.fc = &forecastState{}
	if t.e.cfg.Forecasts != nil {
		t.fc.f = t.e.cfg.Forecasts(ctx, t.task)
	}
	t.updateForecast(ctx)
}

// updateForecast forecasts the final spend from the spend now, says it
// (EventForecast), and fires the forecast trigger when its upper bound has
// passed the hard money cap.
func (t *taskRun) updateForecast(ctx context.Context) {
	if t.fc == nil || t.fc.f == nil {
		return
	}
	f := t.fc.f.ForecastSpend(t.budget.Totals().USD)
	text := f.String()
	t.fc.mu.Lock()
	t.fc.last = &f
	repeat := text == t.fc.said
	t.fc.said = text
	t.fc.mu.Unlock()
	// "no forecast: not enough history" after every call is noise in the
	// live view: a forecast is said when it changes.
	if !repeat {
		t.e.emit(t, purser.Event{Type: purser.EventForecast, Message: text})
	}
	t.checkForecastTrigger(ctx, f)
}

// checkForecastTrigger enters WARNING (for the degrade policy: the
// budget's own tier stays what its spend says) once the forecast's upper
// bound passes hard.usd, if the budget asks for it (warning.forecast:
// hard). It never leaves it: a forecast that falls back is no reason to
// spend freely again within the same task run.
func (t *taskRun) checkForecastTrigger(_ context.Context, f purser.SpendForecast) {
	cfg := t.task.Budget
	if cfg.Warning.Forecast != budget.ForecastHard || cfg.Hard.USD == nil || !f.OK || f.High <= *cfg.Hard.USD {
		return
	}
	t.fc.mu.Lock()
	fired := t.fc.triggered == ""
	if fired {
		t.fc.triggered = fmt.Sprintf("forecast: its upper bound %s passes the hard cap %s", f.High, *cfg.Hard.USD)
	}
	why := t.fc.triggered
	t.fc.mu.Unlock()
	if !fired {
		return
	}
	if st := t.budget.Status(); st.Tier < budget.Warning {
		t.e.emit(t, purser.Event{Type: purser.EventTier, Message: fmt.Sprintf("task budget: %s → %s by %s", st.Tier, budget.Warning, why)})
	}
	t.log.Warn("forecast trigger: WARNING before the spend gets there", "why", why)
}

// forecastTriggered is why the forecast trigger put the task in WARNING,
// or "".
func (t *taskRun) forecastTriggered() string {
	if t.fc == nil {
		return ""
	}
	t.fc.mu.Lock()
	defer t.fc.mu.Unlock()
	return t.fc.triggered
}

// lastForecast is the task's latest forecast; nil when it has none.
func (t *taskRun) lastForecast() *purser.SpendForecast {
	if t.fc == nil {
		return nil
	}
	t.fc.mu.Lock()
	defer t.fc.mu.Unlock()
	return t.fc.last
}

// forecastNote is the forecast at spend, for a message announcing WARNING
// (and the alert made from it): "; forecast to finish …", or "" when the
// task has no forecaster.
func (t *taskRun) forecastNote(spent budget.USD) string {
	if t.fc == nil || t.fc.f == nil {
		return ""
	}
	return "; " + t.fc.f.ForecastSpend(spent).String()
}

// degrade is the degrade decision for a call: the budget's, or, when only
// the forecast trigger put the task in WARNING, the policy's WARNING
// actions with the forecast as their reason. Actions staged at the warning
// line wait for the spend, as ever.
func (t *taskRun) degrade() degradeState {
	d := decideDegrade(t.task.Degrade, t.budget)
	why := t.forecastTriggered()
	if why == "" || d.tier >= budget.Warning {
		return d
	}
	d.tier, d.metric, d.scope, d.why = budget.Warning, budget.Money, budget.ScopeTask, why
	for _, step := range t.task.Degrade.Steps {
		if step.At != purser.AtWarningLine {
			d.active[step.Action] = true
		}
	}
	return d
}

// finishesCall reports whether crossing the hard cap of scope lets the
// call in flight end (onHard: finish-call) rather than cut it.
func (t *taskRun) finishesCall(scope budget.Scope) bool {
	switch scope {
	case budget.ScopeTask:
		return t.task.Budget.FinishCall()
	case budget.ScopeRun:
		if p := t.budget.Parent(); p != nil {
			return p.Config().FinishCall()
		}
	}
	return false
}
