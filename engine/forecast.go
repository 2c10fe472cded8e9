package engine

import (
	"context"
	"encoding/json"
	"errors"
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
	triggered string // why the forecast trigger put the budget in WARNING; "" until it does
}

// startForecast resolves the task's forecaster and makes its first
// forecast, from what it has spent so far (nothing, or a resume's spend).
func (t *taskRun) startForecast(ctx context.Context) {
	t.fc = &forecastState{}
	if t.e.cfg.Forecasts != nil {
		t.fc.f = t.e.cfg.Forecasts(ctx, t.task)
	}
	t.restoreForecastWarning(ctx)
	t.updateForecast(ctx)
}

// restoreForecastWarning puts a resumed task back in WARNING when the
// forecast trigger put it there before (ForecastWarningArtifact) and its
// hard caps are unchanged: before any other event, so that alerts, whose
// baseline for a resumed task says the same (app), do not announce it a
// second time. A raised budget re-arms the trigger instead.
func (t *taskRun) restoreForecastWarning(ctx context.Context) {
	cfg := t.task.Budget
	if cfg.Warning.Forecast != budget.ForecastHard {
		return
	}
	b, err := t.e.cfg.Store.Artifact(ctx, t.task.ID, purser.ForecastWarningArtifact)
	if err != nil {
		if !errors.Is(err, purser.ErrNotFound) {
			t.log.Warn("forecast trigger: reading whether it fired before", "error", err)
		}
		return
	}
	var w purser.ForecastWarning
	if err := json.Unmarshal(b, &w); err != nil || w.Why == "" || !w.Holds(cfg.Hard) {
		return
	}
	t.fc.mu.Lock()
	t.fc.triggered = w.Why
	t.fc.mu.Unlock()
	metric := budget.Money
	if w.Metric == budget.Tokens.String() {
		metric = budget.Tokens
	}
	t.budget.HoldWarning(metric)
}

// recordForecastWarning records that the forecast trigger fired, and why
// (restoreForecastWarning). A failure to is logged: the task goes on in
// WARNING all the same; only a resume would announce it again.
func (t *taskRun) recordForecastWarning(ctx context.Context, why string, metric budget.Metric) {
	hard := t.task.Budget.Hard
	b, err := json.Marshal(purser.ForecastWarning{Why: why, Metric: metric.String(), HardUSD: hard.USD, HardTokens: hard.Tokens})
	if err == nil {
		err = t.e.cfg.Store.SaveArtifact(context.WithoutCancel(ctx), t.task.ID, purser.ForecastWarningArtifact, b)
	}
	if err != nil {
		t.log.Warn("forecast trigger: recording that it fired", "error", err)
	}
}

// updateForecast forecasts the final spend from the spend now (and the
// final tokens, when the task needs them: forecastOf), says it
// (EventForecast), and fires the forecast trigger when an upper bound has
// passed its hard cap.
func (t *taskRun) updateForecast(ctx context.Context) {
	if t.fc == nil || t.fc.f == nil {
		return
	}
	f := t.forecastOf(t.budget.Totals())
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

// forecastOf is the forecast at totals (purser.ForecastAt): the money
// forecast, with the tokens forecast where the task needs it.
func (t *taskRun) forecastOf(totals budget.Totals) purser.SpendForecast {
	return purser.ForecastAt(t.fc.f, t.task.Budget, totals)
}

// checkForecastTrigger puts the task's budget in WARNING (HoldWarning)
// once the forecast's upper bound passes hard.usd (or the tokens
// forecast's hard.tokens), if the budget asks for it (warning.forecast:
// hard): its degrade policy acts, status says WARNING, and the budget's
// tier change is announced — the tier event and the WARNING alert — once,
// saying why (tierMessage). It never leaves it: a forecast that falls back
// is no reason to spend freely again within the same task run. HARD is
// still reached by the spend alone.
func (t *taskRun) checkForecastTrigger(ctx context.Context, f purser.SpendForecast) {
	if t.task.Budget.Warning.Forecast != budget.ForecastHard {
		return
	}
	why, metric := passesHard(t.task.Budget.Hard, f)
	if why == "" {
		return
	}
	t.fc.mu.Lock()
	fired := t.fc.triggered == ""
	if fired {
		t.fc.triggered = why
	}
	t.fc.mu.Unlock()
	if !fired {
		return
	}
	t.log.Warn("forecast trigger: WARNING before the spend gets there", "why", why)
	t.recordForecastWarning(ctx, why, metric)
	t.budget.HoldWarning(metric) // its listener announces the change (tierMessage)
}

// passesHard is why f passes a hard cap of hard — "forecast to finish
// $2.00 (80 %: $0.40–$4.00) passes the hard $1.00", or the same of tokens
// — and the metric of that cap, or "" when no upper bound passes its cap.
// Money is looked at first.
func passesHard(hard budget.HardLimits, f purser.SpendForecast) (string, budget.Metric) {
	if hard.USD != nil && f.OK && f.High > *hard.USD {
		return fmt.Sprintf("%s passes the hard %s", f.Headline(), *hard.USD), budget.Money
	}
	if tok := f.Tokens; hard.Tokens != nil && tok != nil && tok.OK && tok.High > *hard.Tokens {
		return fmt.Sprintf("%s passes the hard %d tokens", tok.Headline(), *hard.Tokens), budget.Tokens
	}
	return "", budget.NoMetric
}

// tierMessage is the tier event for a budget's change of tier, which the
// alerts are made from: "task budget: optimal → warning by money", with the
// forecast when the task enters WARNING (where the money is heading), or,
// when the forecast trigger put it there, why: "task budget: optimal →
// warning: forecast to finish $1.40 (80 %: $0.90–$2.60) passes the hard
// $1.00".
func (t *taskRun) tierMessage(c budget.Change) string {
	msg := fmt.Sprintf("%s budget: %s → %s by %s", c.Scope, c.From, c.To, c.Status.Cause)
	if c.To != budget.Warning || c.Scope != budget.ScopeTask {
		return msg
	}
	if why := t.forecastTriggered(); why != "" && t.budget.WarningHeld() {
		return fmt.Sprintf("%s budget: %s → %s: %s", c.Scope, c.From, c.To, why)
	}
	return msg + t.forecastNote(c.Status.UsedUSD)
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
	totals := t.budget.Totals()
	totals.USD = spent
	return "; " + t.forecastOf(totals).String()
}

// degrade is the degrade decision for a call: the budget's, with the
// forecast as the reason when only the forecast trigger put the task in
// WARNING (its figures would not). Actions staged at the warning line wait
// for the spend, as ever.
func (t *taskRun) degrade() degradeState {
	d := decideDegrade(t.task.Degrade, t.budget)
	if why := t.forecastTriggered(); why != "" && d.scope == budget.ScopeTask && d.tier == budget.Warning && t.budget.WarningHeld() {
		d.why = why
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
