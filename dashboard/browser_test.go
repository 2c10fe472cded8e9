package dashboard_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/sim"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/dashboard"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/report"
	"github.com/purser-dev/purser/sqlite"
	"github.com/purser-dev/purser/validate"
)

// findChromium returns a Chromium (or Chrome) binary, or "" when there is
// none on PATH.
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// artifactDir is where the test keeps its screenshots: $PURSER_ARTIFACTS
// when set (CI uploads it), else a temporary directory.
func artifactDir(t *testing.T) string {
	if dir := os.Getenv("PURSER_ARTIFACTS"); dir != "" {
		must(t, os.MkdirAll(dir, 0o755))
		return dir
	}
	return t.TempDir()
}

// simTask is a task on the sim backend whose validator never passes: each
// call spends 600 tokens and $0.10 over 1.5 s, so the task crosses its
// optimal line (1000 tokens) on its second call and is stopped at its hard
// cap (2500 tokens) a few calls later.
func simTask(t *testing.T, dir string) purser.Task {
	t.Helper()
	ws := filepath.Join(dir, "ws")
	must(t, os.MkdirAll(ws, 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "check.sh"), []byte("echo 'FAIL: trailing comma rejected at parser.go:42'; exit 1\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "sim.yaml"), []byte(
		"steps:\n  - usage: {inputTokens: 500, outputTokens: 100, costUsd: 0.10}\n    delayMs: 1500\n"), 0o644))
	return purser.Task{
		ID:         "fix-commas",
		Goal:       "Make the parser accept trailing commas.",
		Workspace:  ws,
		Validators: []purser.Validator{{Name: "tests", Run: "sh check.sh", Timeout: 30 * time.Second}},
		Backend: purser.BackendSpec{Name: "sim", Type: "sim", Dir: dir,
			Models:  map[string]string{"cheap": "sim-small", "standard": "sim-large"},
			Options: map[string]any{"script": "sim.yaml"}},
		ModelTier: "standard",
		Budget: budget.Config{
			Optimal: budget.Limits{Tokens: ptr(int64(1000)), USD: ptr(budget.USD(150_000_000))},
			Hard:    budget.HardLimits{Tokens: ptr(int64(2500)), USD: ptr(budget.Dollars(1)), MaxIterations: ptr(10)},
		},
		Degrade: purser.DefaultDegradePolicy(),
	}
}

// TestBrowserSeesATaskGoOptimalWarningBlocked loads the dashboard in
// headless Chromium while the engine runs a sim task against the same
// store, and waits for the page to show the task OPTIMAL, then WARNING,
// then BLOCKED, each as the live stream delivers it.
func TestBrowserSeesATaskGoOptimalWarningBlocked(t *testing.T) {
	chromium := findChromium()
	if chromium == "" {
		t.Skip("no chromium binary on PATH (install Debian's chromium package to run the browser test)")
	}
	dir := t.TempDir()
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "purser.db"))
	must(t, err)
	t.Cleanup(func() { store.Close() })
	srv := httptest.NewServer(dashboard.NewHandler(store, dashboard.Options{})) // 127.0.0.1:0
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(filepath.Join(dir, "chromium-profile")),
		chromedp.WindowSize(1280, 1000),
	)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()

	// The page is live before the task exists.
	must(t, chromedp.Do(browser,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-live="1"]`)),
	))

	cb, err := contextbuild.New()
	must(t, err)
	eng, err := engine.New(engine.Config{
		Store:      store,
		Backends:   func(spec purser.BackendSpec) (purser.Backend, error) { return sim.New(spec) },
		Validators: validate.Runner{},
		Context:    cb,
		Artifacts:  report.Artifacts{},
		Prices:     pricing.Builtin(),
		Retry:      engine.RetryPolicy{Max: 2, Base: time.Millisecond},
	})
	must(t, err)
	task := simTask(t, dir)
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	done := make(chan error, 1)
	go func() { done <- eng.RunTask(runCtx, task, nil, "run-1") }()

	card := `article[data-task="fix-commas"]`
	shots := artifactDir(t)
	for _, step := range []struct{ name, selector string }{
		{"optimal", card + `[data-tier="OPTIMAL"][data-state="RUNNING"]`},
		{"warning", card + `[data-tier="WARNING"][data-state="RUNNING"]`},
		{"blocked", card + `[data-state="BLOCKED"]`},
	} {
		if err := chromedp.Do(browser, chromedp.WaitVisible(chromedp.CSS(step.selector))); err != nil {
			t.Fatalf("waiting for the page to show the task %s (%s): %v", step.name, step.selector, err)
		}
		badge, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(card+` [data-badge]`)))
		must(t, err)
		label, err := chromedp.Run(browser, chromedp.AttributeValue(chromedp.CSS(card+` .gauge[data-metric="tokens"] [role="meter"]`), "aria-valuetext"))
		must(t, err)
		t.Logf("%s: badge %q, tokens gauge %q", step.name, badge, label.Value)
		if label.Value == "" {
			t.Errorf("%s: the tokens gauge has no text label", step.name)
		}
	}
	if err := <-done; !errors.As(err, new(*budget.BudgetExhaustedError)) && !errors.Is(err, budget.ErrInsufficientBudget) {
		t.Errorf("the run should end stopped by its budget, got %v", err)
	}

	// Open the history and keep a screenshot of the final page.
	must(t, chromedp.Do(browser,
		chromedp.WaitVisible(chromedp.CSS(card+` details[data-key="fix-commas/STATUS.md"]`)),
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('details').forEach(d => { if (!d.dataset.key.endsWith('.md')) d.open = true })`),
	))
	png, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
	must(t, err)
	badge, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(card+` [data-badge]`)))
	must(t, err)
	if badge != "BLOCKED" {
		t.Errorf("final badge: got %q, want BLOCKED in words", badge)
	}
	path := filepath.Join(shots, "dashboard-blocked.png")
	must(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s", path)
}

// TestBrowserShowsStoreTextAsText loads a store whose task goal and
// STATUS.md hold HTML (agents write whatever they like) and checks the page
// shows it as text: no element the store's text could have created exists.
// The server wants a token, given once in the page's address.
func TestBrowserShowsStoreTextAsText(t *testing.T) {
	chromium := findChromium()
	if chromium == "" {
		t.Skip("no chromium binary on PATH (install Debian's chromium package to run the browser test)")
	}
	// With a token, as off loopback: the page, its script, its style and
	// its event stream must all get through.
	srv := httptest.NewServer(dashboard.NewHandler(filledStore(t), dashboard.Options{Token: "s3cret"}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(filepath.Join(t.TempDir(), "profile")))
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	card := `article[data-task="blocked"]`
	must(t, chromedp.Do(browser,
		chromedp.Navigate(srv.URL+"/?token=s3cret"),
		chromedp.WaitVisible(chromedp.CSS(card+`[data-state="BLOCKED"]`)),
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('details').forEach(d => d.open = true)`),
	))
	injected, err := chromedp.Run(browser, chromedp.Evaluate[int](`document.querySelectorAll('main script, main img').length`))
	must(t, err)
	if injected != 0 {
		t.Errorf("the store's HTML became %d elements", injected)
	}
	goal, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(card+` .goal`)))
	must(t, err)
	if goal != "Fix <script>alert(1)</script> the parser" {
		t.Errorf("goal shown as %q, want the text as stored", goal)
	}
	status, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(card+` details[data-key="blocked/STATUS.md"] pre`)))
	must(t, err)
	if !strings.Contains(status, "<img src=x onerror=alert(1)>") {
		t.Errorf("STATUS.md shown as %q", status)
	}
	// Tier in words, not colour alone: the badge and the gauge's label.
	label, err := chromedp.Run(browser, chromedp.AttributeValue(chromedp.CSS(card+` .gauge[data-metric="tokens"] [role="meter"]`), "aria-valuetext"))
	must(t, err)
	if !strings.Contains(label.Value, "tier HARD") {
		t.Errorf("tokens gauge label %q does not say its tier", label.Value)
	}
}
