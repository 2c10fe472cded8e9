package dashboard_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/dashboard"
	"github.com/purser-dev/purser/sqlite"
)

// TestBrowserShowsTheBudgetTree: the page shows the named budgets as their
// tree — a team's week nested under its org's month — with each node's
// spend against its caps, and follows the spend live until the org is at
// HARD (issue 25: "the dashboard shows the same").
func TestBrowserShowsTheBudgetTree(t *testing.T) {
	chromium := findChromium()
	if chromium == "" {
		t.Skip("no chromium binary on PATH (install Debian's chromium package to run the browser test)")
	}
	ctx := context.Background()
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "purser.db"))
	must(t, err)
	t.Cleanup(func() { store.Close() })
	orgTokens, teamTokens := int64(1000), int64(5000)
	must(t, store.CreateBudget(ctx, purser.NamedBudget{Name: "org", Window: purser.WindowMonth,
		Budget: budget.Config{Hard: budget.HardLimits{Tokens: &orgTokens}}}))
	must(t, store.CreateBudget(ctx, purser.NamedBudget{Name: "team", Parent: "org", Window: purser.WindowWeek,
		Budget: budget.Config{Hard: budget.HardLimits{Tokens: &teamTokens}}}))
	must(t, store.DrawFrom(ctx, "run-1", []string{"team"}))
	spend := func(key string, tokens int64) {
		must(t, store.AppendUsage(ctx, purser.LedgerEntry{Key: key, TaskID: "t", RunID: "run-1", At: time.Now(),
			Event: budget.UsageEvent{InputTokens: tokens, CostSource: budget.CostNone}}))
	}
	spend("a", 900)

	srv := httptest.NewServer(dashboard.NewHandler(store, dashboard.Options{}))
	defer srv.Close()
	bctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(bctx,
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(filepath.Join(dir, "profile")))
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()

	org := `#budgets li[data-budget="org"]`
	team := org + ` li[data-budget="team"]`
	must(t, chromedp.Do(browser,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(team)),
	))
	orgLine, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(org+` > .note`)))
	must(t, err)
	if !strings.Contains(orgLine, "per month") || !strings.Contains(orgLine, "900 tokens of") || !strings.Contains(orgLine, "room") {
		t.Errorf("org's line %q does not say its window, its spend and its room", orgLine)
	}
	teamLine, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(team+` > .note`)))
	must(t, err)
	// The team's own cap is 5000, but its org has only 100 left: the
	// parent binds, and the room says so.
	if !strings.Contains(teamLine, "per week") || !strings.Contains(teamLine, "room 100 tokens") {
		t.Errorf("team's line %q does not show the org's 100 tokens binding it", teamLine)
	}

	// More spend reaches the org's cap: the page follows it live.
	spend("b", 200)
	if err := chromedp.Do(browser, chromedp.WaitVisible(chromedp.CSS(org+`[data-tier="HARD"]`))); err != nil {
		t.Fatalf("the page never showed the org at HARD: %v", err)
	}
}
