package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/dashboard"
)

const shownForecast = "forecast to finish $1.40 (80 %: $0.90–$2.60); of past runs that reached $0.80, 31 % were solved"

// knownForecasts forecasts a fixed figure for the task "blocked" and says
// "not enough history" for every other.
func knownForecasts(_ context.Context, id string) *purser.SpendForecast {
	if id != "blocked" {
		return &purser.SpendForecast{Why: "not enough history: 3 of 12 past runs reached $0.00 (at least 20 needed)"}
	}
	return &purser.SpendForecast{OK: true, Spent: budget.Dollars(8) / 10, Median: budget.Dollars(14) / 10, Low: budget.Dollars(9) / 10,
		High: budget.Dollars(26) / 10, Coverage: 0.8, Calibrated: true, PSolved: 0.31, Labelled: 40}
}

// The snapshot carries each task's forecast, and says when there is none.
func TestSnapshotCarriesForecasts(t *testing.T) {
	srv := httptest.NewServer(dashboard.NewHandler(filledStore(t), dashboard.Options{Forecast: knownForecasts}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/snapshot")
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	for _, want := range []string{`"forecastText":"` + shownForecast + `"`, `"highUsd":2.6`,
		`"forecastText":"no forecast: not enough history: 3 of 12 past runs reached $0.00 (at least 20 needed)"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("snapshot lacks %s:\n%s", want, body)
		}
	}
	// Without a forecaster, no forecast at all.
	plain := httptest.NewServer(dashboard.NewHandler(filledStore(t), dashboard.Options{}))
	defer plain.Close()
	resp2, err := http.Get(plain.URL + "/api/snapshot")
	must(t, err)
	defer resp2.Body.Close()
	if b, _ := io.ReadAll(resp2.Body); strings.Contains(string(b), "forecast") {
		t.Errorf("a forecast without a forecaster: %s", b)
	}
}

// The page shows the forecast line on the task's card, in words.
func TestBrowserShowsTheForecast(t *testing.T) {
	browser, url := openDashboard(t, knownForecasts)
	card := `article[data-task="blocked"]`
	must(t, chromedp.Do(browser,
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(chromedp.CSS(card+` p.forecast[data-forecast="1"]`)),
	))
	text, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(card+` p.forecast`)))
	must(t, err)
	if text != shownForecast {
		t.Errorf("forecast shown as %q, want %q", text, shownForecast)
	}
	none, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`article[data-task="fresh"] p.forecast[data-forecast="0"]`)))
	must(t, err)
	if !strings.HasPrefix(none, "no forecast: not enough history") {
		t.Errorf("a task without history shows %q", none)
	}
}

// tokensForecasts forecasts the tokens of the task "fresh" alone: its
// money is unknown.
func tokensForecasts(context.Context, string) *purser.SpendForecast {
	tok := purser.TokensForecast{OK: true, Used: 300_000, Median: 1_200_000, Low: 800_000, High: 2_100_000, Coverage: 0.8,
		Calibrated: true, PSolved: 0.31, Labelled: 40}
	return &purser.SpendForecast{Why: "this task's spend in money is unknown (no call of it was priced)", Tokens: &tok}
}

const shownTokens = "forecast to finish 1.20M tokens (80 %: 800k–2.10M); of past runs that reached 300k tokens, 31 % were solved" +
	" (no money forecast: this task's spend in money is unknown (no call of it was priced))"

// A task forecast on tokens alone (its money unknown) shows that forecast,
// as a forecast; the snapshot carries its figures.
func TestBrowserShowsTheTokensForecast(t *testing.T) {
	browser, url := openDashboard(t, tokensForecasts)
	resp, err := http.Get(url + "/api/snapshot")
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	if !strings.Contains(string(body), `"highTokens":2100000`) {
		t.Errorf("snapshot lacks the tokens forecast:\n%s", body)
	}
	card := `article[data-task="fresh"]`
	must(t, chromedp.Do(browser,
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(chromedp.CSS(card+` p.forecast[data-forecast="1"]`)),
	))
	text, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(card+` p.forecast`)))
	must(t, err)
	if text != shownTokens {
		t.Errorf("tokens forecast shown as %q, want %q", text, shownTokens)
	}
}

// openDashboard serves the filled store's dashboard with forecasts from
// fc, and opens a headless browser on it; it skips without chromium.
func openDashboard(t *testing.T, fc dashboard.Forecaster) (context.Context, string) {
	t.Helper()
	chromium := findChromium()
	if chromium == "" {
		t.Skip("no chromium binary on PATH (install Debian's chromium package to run the browser test)")
	}
	srv := httptest.NewServer(dashboard.NewHandler(filledStore(t), dashboard.Options{Forecast: fc}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(filepath.Join(t.TempDir(), "profile")))
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	return browser, srv.URL
}
