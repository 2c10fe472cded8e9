package dashboard_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/sqlite"
)

func ptr[T any](v T) *T { return &v }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// filledStore is a store with one run of two tasks: "blocked" went through
// WARNING to its hard token cap (reported and estimated dollars, one call
// of unknown cost, a refused call, two degrade actions and its STATUS.md);
// "fresh" is pending with nothing spent.
func filledStore(t *testing.T) purser.Store {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "purser.db"))
	must(t, err)
	t.Cleanup(func() { s.Close() })
	at := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	must(t, s.SaveRun(ctx, purser.Run{ID: "run-1", Budget: &budget.Config{Hard: budget.HardLimits{USD: ptr(budget.Dollars(10)), MaxIterations: ptr(100)}}}))
	cfg := budget.Config{
		Optimal: budget.Limits{Tokens: ptr(int64(1000))},
		Hard:    budget.HardLimits{Tokens: ptr(int64(3000)), USD: ptr(budget.Dollars(2)), MaxIterations: ptr(10)},
	}
	must(t, s.SaveTask(ctx, purser.TaskRecord{ID: "blocked", RunID: "run-1", Goal: "Fix <script>alert(1)</script> the parser", Budget: cfg,
		State: purser.StateBlocked, Reason: "budget exhausted: task hard cap on tokens reached", CreatedAt: at, UpdatedAt: at}))
	must(t, s.SaveTask(ctx, purser.TaskRecord{ID: "fresh", RunID: "run-1", Goal: "later", Budget: cfg, State: purser.StatePending, CreatedAt: at, UpdatedAt: at}))
	calls := []purser.CallRecord{
		{ID: "c1", TaskID: "blocked", Iteration: 1, Kind: purser.CallMain, Attempt: 1, Model: "m", StartedAt: at, EndedAt: at.Add(time.Second), Outcome: purser.CallOK},
		{ID: "c2", TaskID: "blocked", Iteration: 2, Kind: purser.CallMain, Attempt: 1, Model: "m", StartedAt: at.Add(2 * time.Second), EndedAt: at.Add(3 * time.Second), Outcome: purser.CallOK},
		{ID: "c3", TaskID: "blocked", Iteration: 2, Kind: purser.CallSelfReview, Attempt: 1, Model: "m", StartedAt: at.Add(4 * time.Second), EndedAt: at.Add(5 * time.Second), Outcome: purser.CallTransient, Error: "HTTP 529 overloaded"},
		{ID: "c4", TaskID: "blocked", Iteration: 3, Kind: purser.CallMain, Attempt: 1, Model: "m", StartedAt: at.Add(6 * time.Second), EndedAt: at.Add(6 * time.Second), Outcome: purser.CallRefused},
	}
	for _, c := range calls {
		must(t, s.SaveCall(ctx, c))
	}
	must(t, s.AppendUsage(ctx,
		purser.LedgerEntry{Key: "u1", TaskID: "blocked", RunID: "run-1", CallID: "c1", Iteration: 1, Kind: purser.CallMain, At: at.Add(time.Second),
			Event: budget.UsageEvent{InputTokens: 1000, OutputTokens: 200, CacheReadTokens: 300, USD: budget.USD(250_000_000), CostSource: budget.CostReported}},
		purser.LedgerEntry{Key: "u2", TaskID: "blocked", RunID: "run-1", CallID: "c2", Iteration: 2, Kind: purser.CallMain, At: at.Add(3 * time.Second),
			Event: budget.UsageEvent{InputTokens: 1500, OutputTokens: 300, ReasoningTokens: 100, USD: budget.USD(125_000_000), CostSource: budget.CostEstimated}},
		purser.LedgerEntry{Key: "u3", TaskID: "blocked", RunID: "run-1", CallID: "c3", Iteration: 2, Kind: purser.CallSelfReview, At: at.Add(5 * time.Second),
			Event: budget.UsageEvent{InputTokens: 100, OutputTokens: 0, CostSource: budget.CostUnknown}},
	))
	for _, d := range []purser.DegradeRecord{
		{TaskID: "blocked", Iteration: 2, Call: purser.CallMain, Action: purser.ShrinkContext, Tier: budget.Warning, Metric: budget.Tokens, Detail: "context 9000 → 4000 tokens", At: at.Add(2 * time.Second)},
		{TaskID: "blocked", Iteration: 2, Call: purser.CallMain, Action: purser.DisableSelfReview, Tier: budget.Warning, Metric: budget.Tokens, At: at.Add(2 * time.Second)},
	} {
		must(t, s.SaveDegrade(ctx, d))
	}
	must(t, s.SaveArtifact(ctx, "blocked", "STATUS.md", []byte("# blocked\n\n<img src=x onerror=alert(1)>\n")))
	return s
}
