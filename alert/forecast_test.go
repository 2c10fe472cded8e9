package alert_test

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser/alert"
	"github.com/purser-dev/purser/budget"
)

// The WARNING alert says the forecast the engine's WARNING event carries;
// other alerts, and a WARNING without one, do not.
func TestWarningAlertCarriesTheForecast(t *testing.T) {
	const fc = "forecast to finish $1.40 (80 %: $0.90–$2.60); of past runs that reached $0.80, 31 % were solved"
	msg := "task budget: optimal → warning by money; " + fc
	a := alert.Alert{Kind: alert.Warning, TaskID: "t", Metric: budget.Money, Message: msg}
	if got := a.Text(); !strings.HasSuffix(got, "; "+fc) {
		t.Errorf("WARNING alert %q lacks the forecast", got)
	}
	body, err := alert.Body(alert.FormatJSON, a)
	if err != nil || !strings.Contains(string(body), "forecast to finish $1.40") {
		t.Errorf("JSON payload %s (%v) lacks the forecast", body, err)
	}
	if got := (alert.Alert{Kind: alert.Hard, TaskID: "t", Message: msg}).Text(); strings.Contains(got, "forecast") {
		t.Errorf("HARD alert %q says the forecast", got)
	}
	if got := (alert.Alert{Kind: alert.Warning, TaskID: "t", Message: "task budget: optimal → warning by money; no forecast: not enough history"}).Text(); strings.Contains(got, "forecast") {
		t.Errorf("WARNING alert %q says a forecast it does not have", got)
	}
}
