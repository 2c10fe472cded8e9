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
	"github.com/purser-dev/purser/report"
	"github.com/purser-dev/purser/sqlite"
)

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "purser.db"))
	must(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// stoppedStore holds four tasks under a 1000-token hard cap: "cut" crossed
// it mid-call and the call ended 300ms later; "between" crossed it with an
// iteration's last entry (no call running) 3s before it was recorded
// BLOCKED (the store stamps that record with its own clock, at saved);
// "timed-out" is BLOCKED by wall time, which no ledger entry marks; "done"
// crossed nothing.
func stoppedStore(t *testing.T) (s purser.Store, saved time.Time) {
	t.Helper()
	ctx := context.Background()
	s = openStore(t)
	at := time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)
	cfg := budget.Config{Hard: budget.HardLimits{Tokens: ptr(int64(1000)), MaxIterations: ptr(10)}}
	task := func(id string, state purser.TaskState, updated time.Time) {
		must(t, s.SaveTask(ctx, purser.TaskRecord{ID: id, RunID: "r", Goal: id, Budget: cfg, State: state, CreatedAt: at, UpdatedAt: updated}))
	}
	entry := func(task, key, call string, tokens int64, when time.Time) purser.LedgerEntry {
		return purser.LedgerEntry{Key: key, TaskID: task, RunID: "r", CallID: call, Iteration: 1, Kind: purser.CallMain, At: when,
			Event: budget.UsageEvent{InputTokens: tokens, CostSource: budget.CostUnknown}}
	}
	task("cut", purser.StateBlocked, at.Add(time.Minute))
	must(t, s.SaveCall(ctx, purser.CallRecord{ID: "cut-1", TaskID: "cut", Iteration: 1, Kind: purser.CallMain, Attempt: 1, StartedAt: at,
		EndedAt: at.Add(2300 * time.Millisecond), Outcome: purser.CallCancelled}))
	must(t, s.AppendUsage(ctx, entry("cut", "cut/1", "cut-1", 600, at.Add(time.Second)), entry("cut", "cut/2", "cut-1", 600, at.Add(2*time.Second))))

	saved = time.Now()
	task("between", purser.StateBlocked, saved)
	crossed := saved.Add(-3 * time.Second)
	must(t, s.SaveCall(ctx, purser.CallRecord{ID: "between-1", TaskID: "between", Iteration: 1, Kind: purser.CallMain, Attempt: 1,
		StartedAt: crossed.Add(-time.Minute), EndedAt: crossed.Add(-time.Second), Outcome: purser.CallOK}))
	must(t, s.AppendUsage(ctx, entry("between", "between/1", "between-1", 900, crossed.Add(-time.Second)),
		purser.LedgerEntry{Key: "between/end", TaskID: "between", RunID: "r", Iteration: 1, At: crossed,
			Event: budget.UsageEvent{InputTokens: 200, CostSource: budget.CostUnknown, IterationEnd: true}}))

	task("timed-out", purser.StateBlocked, at.Add(time.Hour))
	must(t, s.AppendUsage(ctx, entry("timed-out", "timed-out/1", "", 10, at)))

	task("done", purser.StateDone, at.Add(time.Minute))
	must(t, s.AppendUsage(ctx, entry("done", "done/1", "", 1200, at)))
	return s, saved
}

func TestTimeToStopIsMeasuredFromTheHardCrossingToTheStop(t *testing.T) {
	store, saved := stoppedStore(t)
	fams := scrape(t, dashboard.NewHandler(store, dashboard.Options{}))
	since := time.Since(saved) // how late "between" may have been stamped BLOCKED, at most
	f := fams["purser_time_to_stop_seconds"]
	if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetHistogram() == nil {
		t.Fatalf("purser_time_to_stop_seconds: missing or not a histogram: %v", f)
	}
	h := f.GetMetric()[0].GetHistogram()
	// cut: 2.3s (call end) − 2s (crossing) = 0.3s; between: 3s from its
	// crossing to its BLOCKED record, plus however long the store took to
	// stamp it; timed-out and done: not observed.
	if h.GetSampleCount() != 2 {
		t.Errorf("count = %d, want 2 (the two tasks whose crossing the ledger marks)", h.GetSampleCount())
	}
	if sum := h.GetSampleSum(); sum < 3.3-1e-9 || sum > 3.3+since.Seconds()+1e-9 {
		t.Errorf("sum = %v s, want 3.3 s (+ up to %v)", sum, since)
	}
	want := map[float64]uint64{0.25: 0, 0.5: 1, 1: 1, 2.5: 1, 300: 2}
	seen := 0
	for _, b := range h.GetBucket() {
		if n, ok := want[b.GetUpperBound()]; ok {
			seen++
			if b.GetCumulativeCount() != n {
				t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), n)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the buckets %v", seen, want)
	}
}

func TestTimeToStopIsEmptyWithoutABlockedTask(t *testing.T) {
	fams := scrape(t, dashboard.NewHandler(openStore(t), dashboard.Options{}))
	f := fams["purser_time_to_stop_seconds"]
	if f == nil || len(f.GetMetric()) != 1 {
		t.Fatalf("purser_time_to_stop_seconds is missing: the series must exist from the first scrape")
	}
	if n := f.GetMetric()[0].GetHistogram().GetSampleCount(); n != 0 {
		t.Errorf("count = %d with no task, want 0", n)
	}
}

// agentStore has one task whose main call delegated to sub-agents and one
// the main agent did alone.
func agentStore(t *testing.T) purser.Store {
	t.Helper()
	ctx := context.Background()
	s := openStore(t)
	at := time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)
	cfg := budget.Config{Hard: budget.HardLimits{USD: ptr(budget.Dollars(5)), MaxIterations: ptr(10)}}
	for _, id := range []string{"delegated", "alone"} {
		must(t, s.SaveTask(ctx, purser.TaskRecord{ID: id, RunID: "r", Goal: id, Budget: cfg, State: purser.StateDone, CreatedAt: at, UpdatedAt: at}))
	}
	entry := func(task, key, call, model, agent string, tokens int64, nanos budget.USD) purser.LedgerEntry {
		return purser.LedgerEntry{Key: key, TaskID: task, RunID: "r", CallID: call, Iteration: 1, Kind: purser.CallMain, At: at,
			Event: budget.UsageEvent{Model: model, Agent: agent, InputTokens: tokens, USD: nanos, CostSource: budget.CostReported}}
	}
	must(t, s.AppendUsage(ctx,
		entry("delegated", "d/1", "d1", "opus", "", 100, budget.Dollars(1)),
		entry("delegated", "d/2", "d1", "haiku", "Explore: map the parser", 40, budget.Dollars(1)/10),
		entry("delegated", "d/3", "d1", "haiku", "Explore: map the parser", 60, budget.Dollars(1)/10),
		entry("delegated", "d/4", "d2", "opus", "", 50, budget.Dollars(1)/2),
		entry("alone", "a/1", "a1", "opus", "", 70, budget.Dollars(1)),
	))
	return s
}

func TestTheTaskViewBreaksSpendDownBySubAgentAndModel(t *testing.T) {
	snap, err := dashboard.Load(context.Background(), agentStore(t))
	must(t, err)
	tasks := map[string]dashboard.TaskView{}
	for _, r := range snap.Runs {
		for _, tv := range r.Tasks {
			tasks[tv.ID] = tv
		}
	}
	tests := []struct {
		name           string
		task           string
		agents, models []dashboard.SpendShare
	}{
		{"a task that delegated shows each sub-agent beside the main agent", "delegated",
			[]dashboard.SpendShare{{Name: report.MainAgent, Calls: 2, Tokens: 150, Money: "$1.50 (reported)"},
				{Name: "Explore: map the parser", Calls: 1, Tokens: 100, Money: "$0.20 (reported)"}},
			[]dashboard.SpendShare{{Name: "opus", Calls: 2, Tokens: 150, Money: "$1.50 (reported)"},
				{Name: "haiku", Calls: 1, Tokens: 100, Money: "$0.20 (reported)"}}},
		{"a task the main agent did alone has no sub-agent breakdown", "alone",
			[]dashboard.SpendShare{},
			[]dashboard.SpendShare{{Name: "opus", Calls: 1, Tokens: 70, Money: "$1.00 (reported)"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tv, ok := tasks[tt.task]
			if !ok {
				t.Fatalf("task %s not in the snapshot", tt.task)
			}
			if !equalShares(tv.Agents, tt.agents) {
				t.Errorf("agents = %+v, want %+v", tv.Agents, tt.agents)
			}
			if !equalShares(tv.Models, tt.models) {
				t.Errorf("models = %+v, want %+v", tv.Models, tt.models)
			}
		})
	}
}

func equalShares(a, b []dashboard.SpendShare) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The page shows the per-sub-agent table for the task that delegated, and
// none for the task its main agent did alone.
func TestBrowserShowsSpendPerSubAgent(t *testing.T) {
	chromium := findChromium()
	if chromium == "" {
		t.Skip("no chromium binary on PATH (install Debian's chromium package to run the browser test)")
	}
	srv := httptest.NewServer(dashboard.NewHandler(agentStore(t), dashboard.Options{}))
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
	must(t, chromedp.Do(browser,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`article[data-task="alone"]`)),
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('details').forEach(d => d.open = true)`),
	))
	table, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`article[data-task="delegated"] details[data-key="delegated/agents"] table`)))
	must(t, err)
	for _, want := range []string{report.MainAgent, "Explore: map the parser", "$0.20 (reported)"} {
		if !strings.Contains(table, want) {
			t.Errorf("the per-sub-agent table lacks %q:\n%s", want, table)
		}
	}
	alone, err := chromedp.Run(browser, chromedp.Evaluate[int](
		`document.querySelectorAll('article[data-task="alone"] details[data-key="alone/agents"]').length`))
	must(t, err)
	if alone != 0 {
		t.Error("a task its main agent did alone shows a per-sub-agent table")
	}
	models, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`article[data-task="alone"] details[data-key="alone/models"] table`)))
	must(t, err)
	if !strings.Contains(models, "opus") {
		t.Errorf("the per-model table lacks the model:\n%s", models)
	}
}
