package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/alert"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/prompt"
)

// tenfold forecasts a final spend of ten times what is spent (a known
// answer), and records what it was asked.
type tenfold struct {
	mu    sync.Mutex
	asked []budget.USD
}

func (f *tenfold) ForecastSpend(spent budget.USD) purser.SpendForecast {
	f.mu.Lock()
	f.asked = append(f.asked, spent)
	f.mu.Unlock()
	return purser.SpendForecast{OK: true, Spent: spent, Median: spent * 5, Low: spent, High: spent * 10, Coverage: 0.8,
		Calibrated: true, PSolved: 0.31, Labelled: 40, Reached: 40, Runs: 80}
}

// Two iterations of $0.30: the first fails, the second fixes.
const thirtyThenFix = `
steps:
  - usage: {inputTokens: 3000, outputTokens: 500, costUsd: 0.30}
  - usage: {inputTokens: 800, outputTokens: 200, costUsd: 0.30}
    files: {src/fixed: "yes"}
`

func forecastFixture(t *testing.T, script string, cfg budget.Config) (*fixture, *tenfold) {
	f := newFixture(t, script)
	fc := &tenfold{}
	f.cfg.Forecasts = func(context.Context, purser.Task) purser.SpendForecaster { return fc }
	f.task.Budget = cfg
	return f, fc
}

// The forecast is made before the first call and after every call, said in
// an event, and written in STATUS.md.
func TestForecastUpdatedAfterEveryCall(t *testing.T) {
	t.Parallel()
	f, fc := forecastFixture(t, thirtyThenFix, budget.Config{Hard: budget.HardLimits{USD: usd("10"), MaxIterations: ptr(5)}})
	must(t, f.run())
	want := []budget.USD{0, mustUSD(t, "0.30"), mustUSD(t, "0.60")}
	if len(fc.asked) != len(want) {
		t.Fatalf("forecast asked at %v, want at %v (start, then after each of the 2 calls)", fc.asked, want)
	}
	for i := range want {
		if fc.asked[i] != want[i] {
			t.Fatalf("forecast asked at %v, want %v", fc.asked, want)
		}
	}
	var lines []string
	for _, ev := range f.events {
		if ev.Type == purser.EventForecast {
			lines = append(lines, ev.Message)
		}
	}
	if len(lines) != 3 || lines[1] != "forecast to finish $1.50 (80 %: $0.30–$3.00); of past runs that reached $0.30, 31 % were solved" {
		t.Fatalf("forecast events: %q", lines)
	}
	if status := readFile(t, filepath.Join(f.workspace, "STATUS.md")); !strings.Contains(status, "Forecast to finish $3.00 (80 %: $0.60–$6.00)") {
		t.Errorf("STATUS.md lacks the last forecast:\n%s", status)
	}
	// No trigger configured: no degrade, though the upper bound passed $10.
	if ds, _ := f.store.Degrades(context.Background(), f.task.ID); len(ds) != 0 {
		t.Errorf("degrades without warning.forecast: %+v", ds)
	}
}

// warning.forecast: hard puts the task's budget in WARNING once the
// forecast's upper bound passes the hard money cap — here after the first
// call ($0.30 spent, $3.00 forecast at most, cap $2.50), long before the
// spend gets there — and the second iteration is degraded with the
// forecast as the reason.
func TestForecastTriggerEntersWarningEarly(t *testing.T) {
	t.Parallel()
	cfg := budget.Config{Warning: budget.Limits{Forecast: budget.ForecastHard}, Hard: budget.HardLimits{USD: usd("2.50"), MaxIterations: ptr(5)}}
	f, _ := forecastFixture(t, thirtyThenFix, cfg)
	must(t, f.run())
	const why = "forecast to finish $1.50 (80 %: $0.30–$3.00) passes the hard $2.50"
	ds := assertDegrade(t, f, purser.RepairOnlyMode, budget.Money)
	for _, d := range ds {
		if d.Iteration != 2 || d.Tier != budget.Warning || !strings.Contains(d.Detail, why) {
			t.Errorf("degrade %+v: want iteration 2 in WARNING, the forecast as its reason", d)
		}
	}
	for _, c := range f.calls() {
		repair := strings.Contains(c.Prompt, prompt.RepairOnlyLines[0])
		if repair != (c.Iteration == 2) {
			t.Errorf("iteration %d: repair-only %v", c.Iteration, repair)
		}
	}
	var tier []purser.Event
	for _, ev := range f.events {
		if ev.Type == purser.EventTier {
			tier = append(tier, ev)
		}
	}
	if len(tier) != 1 || tier[0].Message != "task budget: optimal → warning: "+why || tier[0].Status.Tier != budget.Warning {
		t.Errorf("tier events %+v: want one, the budget in WARNING by the forecast", tier)
	}
	if st := f.events[len(f.events)-1].Status; st.Tier != budget.Warning || st.UsedUSD != mustUSD(t, "0.60") {
		t.Errorf("the budget's own tier at the end is %s at %s, want the forecast's WARNING at $0.60", st.Tier, st.UsedUSD)
	}
}

// The forecast trigger moves the budget's own tier: the WARNING alert is
// sent once, saying why; the spend still reaches HARD, which BLOCKs the
// task with nothing retried.
func TestForecastTriggerAlertsOnceAndHardStillBlocks(t *testing.T) {
	t.Parallel()
	cfg := budget.Config{Warning: budget.Limits{Forecast: budget.ForecastHard}, Hard: budget.HardLimits{USD: usd("1.0"), MaxIterations: ptr(10)}}
	f, _ := forecastFixture(t, runaway, cfg)
	hook := &webhook{}
	n := alert.New(alert.Config{Webhooks: []alert.Webhook{{Name: "ops", URL: "http://alerts.invalid/hook", Format: alert.FormatSlack}}},
		alert.Options{Client: hook})
	f.observe = n.Observe
	err := f.run()
	if res := n.Close(); res.Undelivered != 0 {
		t.Fatalf("%d alerts undelivered", res.Undelivered)
	}
	var be *budget.BudgetExhaustedError
	if !errors.As(err, &be) || be.Metric != budget.Money || f.state().State != purser.StateBlocked {
		t.Fatalf("RunTask = %v, state %s: want BLOCKED by BudgetExhaustedError on money", err, f.state().State)
	}
	if recs, _ := f.store.Calls(context.Background(), f.task.ID); len(recs) != 3 || len(f.calls()) != 3 {
		t.Fatalf("%d call records, %d calls: want 3 (the third cut at the cap), nothing retried", len(recs), len(f.calls()))
	}
	const warning = "Purser: task " + "%s entered WARNING (money): used $0.40"
	var warnings, hard int
	for _, text := range hook.texts() {
		switch {
		case strings.Contains(text, "entered WARNING"):
			warnings++
			if !strings.HasPrefix(text, fmt.Sprintf(warning, f.task.ID)) ||
				!strings.HasSuffix(text, "; forecast to finish $2.00 (80 %: $0.40–$4.00) passes the hard $1.00") {
				t.Errorf("WARNING alert %q: want it sent at $0.40 spent, saying the forecast passes the cap", text)
			}
		case strings.Contains(text, "reached its HARD cap"):
			hard++
		}
	}
	if warnings != 1 || hard != 1 {
		t.Errorf("alerts %q: want one WARNING (the forecast's) and one HARD", hook.texts())
	}
}

// webhook is an alert receiver that takes every delivery.
type webhook struct {
	mu     sync.Mutex
	bodies []string
}

func (w *webhook) Do(r *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.bodies = append(w.bodies, string(b))
	w.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

// texts are the Slack payloads' texts received, in order.
func (w *webhook) texts() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, b := range w.bodies {
		var p struct{ Text string }
		if json.Unmarshal([]byte(b), &p) == nil {
			out = append(out, p.Text)
		}
	}
	return out
}

// onHard: finish-call lets the call that crosses the hard cap end and books
// all it spent; the task is BLOCKED all the same, with BudgetExhaustedError,
// nothing retried, and a resume starts nothing.
func TestFinishCallBooksTheCallThenBlocks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		onHard    budget.OnHard
		cancelled bool
		spentMax  string
	}{
		{budget.OnHardCut, true, "1.05"},
		{budget.OnHardFinishCall, false, "1.20"},
	} {
		t.Run(string(tc.onHard), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, runaway)
			f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("1.0"), MaxIterations: ptr(10)}, OnHard: tc.onHard}
			err := f.run()
			var be *budget.BudgetExhaustedError
			if !errors.As(err, &be) || be.Metric != budget.Money {
				t.Fatalf("RunTask = %v, want BudgetExhaustedError on money", err)
			}
			calls := f.calls()
			if len(calls) != 3 || calls[2].Cancelled != tc.cancelled {
				t.Fatalf("calls = %d, cancelled %v; want 3, the third cancelled: %v", len(calls), cancelled(calls), tc.cancelled)
			}
			st := budgetOf(t, f)
			if st.UsedUSD < budget.Dollars(1) || st.UsedUSD > mustUSD(t, tc.spentMax) {
				t.Fatalf("spent %s, want $1.00–$%s", st.UsedUSD, tc.spentMax)
			}
			if !tc.cancelled && st.UsedUSD != mustUSD(t, "1.20") {
				t.Fatalf("finish-call booked %s, want the whole third call: $1.20", st.UsedUSD)
			}
			recs, _ := f.store.Calls(context.Background(), f.task.ID)
			if len(recs) != 3 {
				t.Fatalf("%d call records: something was retried", len(recs))
			}
			if want := map[bool]purser.CallOutcome{true: purser.CallCancelled, false: purser.CallOK}[tc.cancelled]; recs[2].Outcome != want {
				t.Errorf("third call %s, want %s", recs[2].Outcome, want)
			}
			if f.state().State != purser.StateBlocked {
				t.Fatalf("state %s, want BLOCKED", f.state().State)
			}
			err = f.run() // a resume without a raise
			if !errors.As(err, &be) || len(f.calls()) != 3 {
				t.Fatalf("resume = %v after %d calls: want BudgetExhaustedError and no call", err, len(f.calls()))
			}
		})
	}
}

// stuckAfter ends a task whose validators fail the same way, iteration
// after iteration, while its calls change nothing; calls that change the
// workspace are not stuck.
func TestStuckRunIsBlockedEarly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100, costUsd: 0.01}\n")
	f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("1"), MaxIterations: ptr(10)}, StuckAfter: ptr(3)}
	err := f.run()
	if !errors.Is(err, purser.ErrStuck) || engine.IsBudgetStop(err) {
		t.Fatalf("RunTask = %v, want a stop by ErrStuck", err)
	}
	if n := len(f.calls()); n != 3 {
		t.Fatalf("%d calls, want 3 (stuckAfter: 3)", n)
	}
	rec := f.state()
	if rec.State != purser.StateBlocked || !strings.Contains(rec.Reason, "stuck: tests failed 3 iterations in a row with no change to the workspace") {
		t.Fatalf("database: %s %q", rec.State, rec.Reason)
	}
	if status := readFile(t, filepath.Join(f.workspace, "STATUS.md")); !strings.Contains(status, "**BLOCKED**: stuck") {
		t.Errorf("STATUS.md does not say stuck:\n%s", status)
	}
	var stop string
	for _, ev := range f.events {
		if ev.Type == purser.EventStop {
			stop = ev.Message
		}
	}
	if !strings.Contains(stop, "BLOCKED: stuck") {
		t.Errorf("stop event %q", stop)
	}

	// The agent writes each time: it is working, however badly.
	g := newFixture(t, "steps:\n  - usage: {inputTokens: 100, costUsd: 0.01}\n    files: {src/attempt.txt: \"again\"}\n")
	g.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("1"), MaxIterations: ptr(4)}, StuckAfter: ptr(2)}
	var be *budget.BudgetExhaustedError
	if err := g.run(); !errors.As(err, &be) || be.Metric != budget.Iterations {
		t.Fatalf("a task that changes files: %v, want the iteration cap", err)
	}
	// Off when unset.
	h := newFixture(t, "steps:\n  - usage: {inputTokens: 100, costUsd: 0.01}\n")
	h.task.Budget = budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(4)}}
	if err := h.run(); errors.Is(err, purser.ErrStuck) || len(h.calls()) != 4 {
		t.Fatalf("without stuckAfter: %v after %d calls", err, len(h.calls()))
	}
}

// The event announcing WARNING carries the forecast at that moment: the
// WARNING alert is made from it.
func TestWarningEventCarriesTheForecast(t *testing.T) {
	t.Parallel()
	f, _ := forecastFixture(t, thirtyThenFix, budget.Config{Optimal: budget.Limits{USD: usd("0.25")}, Hard: budget.HardLimits{USD: usd("10"), MaxIterations: ptr(5)}})
	must(t, f.run())
	var warn []string
	for _, ev := range f.events {
		if ev.Type == purser.EventTier && strings.Contains(ev.Message, "→ warning") {
			warn = append(warn, ev.Message)
		}
	}
	if len(warn) != 1 || !strings.Contains(warn[0], "task budget: optimal → warning by money; forecast to finish $") ||
		!strings.Contains(warn[0], "% were solved") {
		t.Fatalf("WARNING events %q: want one, with the forecast", warn)
	}
}
