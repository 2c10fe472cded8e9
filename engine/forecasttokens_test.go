package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/alert"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/report"
)

// bothTenfold forecasts money as tenfold does, and tokens the same way: a
// final of five (median) to ten (upper bound) times what is used.
type bothTenfold struct{ tenfold }

func (*bothTenfold) ForecastTokens(used int64) purser.TokensForecast {
	return purser.TokensForecast{OK: true, Used: used, Median: used * 5, Low: used, High: used * 10, Coverage: 0.8,
		Calibrated: true, PSolved: 0.25, Labelled: 40, Reached: 40, Runs: 80}
}

func bothFixture(t *testing.T, script string, cfg budget.Config) *fixture {
	f := newFixture(t, script)
	fc := &bothTenfold{}
	f.cfg.Forecasts = func(context.Context, purser.Task) purser.SpendForecaster { return fc }
	f.task.Budget = cfg
	return f
}

// warning.forecast: hard against a tokens cap (no money cap): the tokens
// forecast's upper bound passes hard.tokens after the first call (8,000
// tokens used, 80,000 at most forecast, cap 20,000), the budget enters
// WARNING and one alert says why; the tokens still reach HARD, which
// BLOCKs the task, nothing retried.
func TestForecastTriggerOnATokensCap(t *testing.T) {
	t.Parallel()
	cfg := budget.Config{Warning: budget.Limits{Forecast: budget.ForecastHard}, Hard: budget.HardLimits{Tokens: ptr[int64](20_000), MaxIterations: ptr(10)}}
	must(t, cfg.Validate())
	f := bothFixture(t, runaway, cfg)
	hook := &webhook{}
	n := alert.New(alert.Config{Webhooks: []alert.Webhook{{Name: "ops", URL: "http://alerts.invalid/hook", Format: alert.FormatSlack}}},
		alert.Options{Client: hook})
	f.observe = n.Observe
	err := f.run()
	if res := n.Close(); res.Undelivered != 0 {
		t.Fatalf("%d alerts undelivered", res.Undelivered)
	}
	var be *budget.BudgetExhaustedError
	if !errors.As(err, &be) || be.Metric != budget.Tokens || f.state().State != purser.StateBlocked {
		t.Fatalf("RunTask = %v, state %s: want BLOCKED by BudgetExhaustedError on tokens", err, f.state().State)
	}
	recs, _ := f.store.Calls(context.Background(), f.task.ID)
	if len(recs) < 2 || len(recs) != len(f.calls()) {
		t.Fatalf("%d call records, %d calls: want the same, at least 2 (nothing retried)", len(recs), len(f.calls()))
	}
	for _, r := range recs {
		if r.Attempt != 1 {
			t.Errorf("call %s is attempt %d: a call was retried", r.ID, r.Attempt)
		}
	}
	const why = "forecast to finish 40.0k tokens (80 %: 8000–80.0k) passes the hard 20000 tokens"
	var tier []string
	for _, ev := range f.events {
		if ev.Type == purser.EventTier && strings.Contains(ev.Message, "→ warning") {
			tier = append(tier, ev.Message)
		}
	}
	if len(tier) != 1 || tier[0] != "task budget: optimal → warning: "+why {
		t.Errorf("WARNING events %q: want one, the tokens forecast as the reason", tier)
	}
	var warnings, hard int
	for _, text := range hook.texts() {
		switch {
		case strings.Contains(text, "entered WARNING"):
			warnings++
			if !strings.HasSuffix(text, "; "+why) {
				t.Errorf("WARNING alert %q: want it to say the tokens forecast passes the cap", text)
			}
			if !strings.Contains(text, "entered WARNING (tokens)") {
				t.Errorf("WARNING alert %q: want it to name tokens, the metric the forecast was of", text)
			}
		case strings.Contains(text, "reached its HARD cap"):
			hard++
		}
	}
	if warnings != 1 || hard != 1 {
		t.Errorf("alerts %q: want one WARNING (the forecast's) and one HARD", hook.texts())
	}
}

// A backend that reports no USD, on a model Purser has no price for: the
// money forecast, which would be conditioned on a $0 that means nothing,
// says why there is none, and the tokens forecast is made instead — in the
// live view's events and STATUS.md.
func TestTokensForecastWhenTheMoneyIsUnknown(t *testing.T) {
	t.Parallel()
	const tokensOnly = "steps:\n  - usage: {inputTokens: 1000, outputTokens: 100}\n  - usage: {inputTokens: 1000, outputTokens: 100}\n    files: {src/fixed: \"yes\"}\n"
	f := bothFixture(t, tokensOnly, budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(3)}})
	f.task.Backend.Models = map[string]string{"standard": "sim-large"}
	must(t, f.run())
	var lines []string
	for _, ev := range f.events {
		if ev.Type == purser.EventForecast {
			lines = append(lines, ev.Message)
		}
	}
	if len(lines) < 2 {
		t.Fatalf("forecast events %q: want one before the calls and one after", lines)
	}
	if strings.Contains(lines[0], "tokens") {
		t.Errorf("before any call the money is not unknown; the forecast said %q", lines[0])
	}
	const want = "forecast to finish 5500 tokens (80 %: 1100–11.0k); of past runs that reached 1100 tokens, 25 % were solved (no money forecast: this task's spend in money is unknown (no call of it was priced))"
	if lines[1] != want {
		t.Errorf("after the first call: %q\nwant %q", lines[1], want)
	}
	if status := readFile(t, filepath.Join(f.workspace, "STATUS.md")); !strings.Contains(status, "11.0k tokens (80 %: 2200–22.0k)") {
		t.Errorf("STATUS.md lacks the tokens forecast:\n%s", status)
	}
}

// A task the forecast trigger put in WARNING, interrupted and resumed with
// the same hard caps, is in WARNING again from its first event — so the
// WARNING alert, sent once when the trigger fired, is not sent a second
// time by the resumed run (its alerts' baseline says WARNING, as app's
// does from the same record).
func TestForecastWarningAlertOncePerTaskAcrossAResume(t *testing.T) {
	t.Parallel()
	cfg := budget.Config{Warning: budget.Limits{Forecast: budget.ForecastHard}, Hard: budget.HardLimits{USD: usd("3.00"), MaxIterations: ptr(3)}}
	f, _ := forecastFixture(t, runaway, cfg)
	hook := &webhook{}
	notifier := func() *alert.Notifier {
		return alert.New(alert.Config{Webhooks: []alert.Webhook{{Name: "ops", URL: "http://alerts.invalid/hook", Format: alert.FormatSlack}}},
			alert.Options{Client: hook})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n1 := notifier()
	f.observe = func(ev purser.Event) {
		n1.Observe(ev)
		if ev.Type == purser.EventTier && ev.Status.Tier == budget.Warning {
			cancel() // interrupted once in WARNING
		}
	}
	if err := f.engine().RunTask(ctx, f.task, nil, "run-1"); f.state().State != purser.StatePending {
		t.Fatalf("first run: %v, state %s; want it interrupted, PENDING", err, f.state().State)
	}
	n1.Close()
	if warned := countAlerts(hook, "entered WARNING"); warned != 1 {
		t.Fatalf("first run: %d WARNING alerts, want 1: %q", warned, hook.texts())
	}

	// The baseline app gives a resumed task's alerts: its recorded status,
	// WARNING since the trigger's record stands.
	st, state, err := report.RecordedStatus(context.Background(), f.store, f.task.ID)
	must(t, err)
	if _, err := f.store.Artifact(context.Background(), f.task.ID, purser.ForecastWarningArtifact); err != nil {
		t.Fatalf("the trigger's firing was not recorded: %v", err)
	}
	st.Tier = budget.Warning
	n2 := notifier()
	n2.Baseline(f.task.ID, st, state)
	f.mu.Lock()
	f.events, f.observe = nil, n2.Observe
	f.mu.Unlock()
	err = f.run()
	n2.Close()
	var be *budget.BudgetExhaustedError
	if !errors.As(err, &be) || be.Metric != budget.Iterations {
		t.Fatalf("resumed run: %v, want BLOCKED at the iteration cap", err)
	}
	if first := f.events[0]; first.Type != purser.EventTier || first.Status.Tier != budget.Warning ||
		!strings.HasSuffix(first.Message, "passes the hard $3.00") {
		t.Errorf("the resumed run's first event is %s %q (%s), want it back in WARNING, saying why", first.Type, first.Message, first.Status.Tier)
	}
	if warned := countAlerts(hook, "entered WARNING"); warned != 1 {
		t.Errorf("%d WARNING alerts over the two runs, want 1: %q", warned, hook.texts())
	}
}

func countAlerts(hook *webhook, part string) int {
	n := 0
	for _, text := range hook.texts() {
		if strings.Contains(text, part) {
			n++
		}
	}
	return n
}
