package dashboard_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/dashboard"
)

// stopFixture writes tasks, their calls, iterations and ledger into a store.
type stopFixture struct {
	t     *testing.T
	store purser.Store
}

func (f stopFixture) task(id, run string, state purser.TaskState, cfg budget.Config, elapsed time.Duration, updated time.Time) {
	f.t.Helper()
	must(f.t, f.store.SaveTask(context.Background(), purser.TaskRecord{ID: id, RunID: run, Goal: id, Budget: cfg, State: state,
		Elapsed: elapsed, CreatedAt: updated.Add(-time.Hour), UpdatedAt: updated}))
}

func (f stopFixture) iteration(task string, n int, from, to time.Time) {
	f.t.Helper()
	must(f.t, f.store.SaveIteration(context.Background(), purser.IterationRecord{TaskID: task, N: n, StartedAt: from, EndedAt: to, Outcome: "stopped"}))
}

func (f stopFixture) call(task, id string, n int, from, to time.Time, outcome purser.CallOutcome) {
	f.t.Helper()
	must(f.t, f.store.SaveCall(context.Background(), purser.CallRecord{ID: id, TaskID: task, Iteration: n, Kind: purser.CallMain, Attempt: 1,
		StartedAt: from, EndedAt: to, Outcome: outcome}))
}

func (f stopFixture) spend(task, run, key, call string, usd budget.USD, tokens int64, at time.Time) {
	f.t.Helper()
	must(f.t, f.store.AppendUsage(context.Background(), purser.LedgerEntry{Key: key, TaskID: task, RunID: run, CallID: call, Iteration: 1,
		Kind: purser.CallMain, At: at, Event: budget.UsageEvent{InputTokens: tokens, USD: usd, CostSource: budget.CostReported}}))
}

func TestTimeToStopObservesEveryCapThatStopsATask(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tokenCap := budget.Config{Hard: budget.HardLimits{Tokens: ptr(int64(1000)), MaxIterations: ptr(10)}}
	minuteCap := budget.Config{Hard: budget.HardLimits{TimeMinutes: ptr(budget.Minutes(time.Minute)), MaxIterations: ptr(10)}}
	roomy := budget.Config{Hard: budget.HardLimits{USD: ptr(budget.Dollars(10)), MaxIterations: ptr(10)}}
	for _, tc := range []struct {
		name string
		fill func(f stopFixture)
		// want is the time to stop of each observed task, in seconds.
		want []float64
	}{
		{
			name: "a ledger entry crosses the task's own cap mid-call: measured to the call's end",
			fill: func(f stopFixture) {
				f.task("cut", "r", purser.StateBlocked, tokenCap, 3*time.Second, sec(60))
				f.iteration("cut", 1, sec(0), sec(2.5))
				f.call("cut", "cut-1", 1, sec(0), sec(2.3), purser.CallCancelled)
				f.spend("cut", "r", "cut/1", "cut-1", 0, 600, sec(1))
				f.spend("cut", "r", "cut/2", "cut-1", 0, 600, sec(2))
			},
			want: []float64{0.3},
		},
		{
			// Resumed with 40s of its minute used: this session's clock
			// started at 0 and reached the cap at 20s, cutting the call
			// running then, which ended at 20.4s; the iteration was
			// recorded ended at 21s, when the clock stopped at 61s.
			name: "the wall-time cap, with time carried over a resume, cuts the call running then",
			fill: func(f stopFixture) {
				f.task("timed-out", "r", purser.StateBlocked, minuteCap, 61*time.Second, sec(22))
				f.iteration("timed-out", 1, sec(-7200), sec(-7160))
				f.call("timed-out", "old-1", 1, sec(-7199), sec(-7170), purser.CallOK)
				f.iteration("timed-out", 2, sec(0), sec(21))
				f.call("timed-out", "new-1", 2, sec(1), sec(20.4), purser.CallCancelled)
				f.spend("timed-out", "r", "t/1", "new-1", budget.Dollars(1), 50, sec(5))
			},
			want: []float64{0.4},
		},
		{
			// The run's $1 is crossed by the other task's entry at 3s; the
			// blocked task's own $10 is far away; its call ends at 3.2s.
			name: "another task's entry crosses the run's cap while the task runs",
			fill: func(f stopFixture) {
				must(f.t, f.store.SaveRun(context.Background(), purser.Run{ID: "capped", Budget: &budget.Config{Hard: budget.HardLimits{USD: ptr(budget.Dollars(1)), MaxIterations: ptr(100)}}}))
				f.task("victim", "capped", purser.StateBlocked, roomy, 4*time.Second, sec(60))
				f.iteration("victim", 1, sec(0), sec(4))
				f.call("victim", "v-1", 1, sec(0), sec(3.2), purser.CallCancelled)
				f.spend("victim", "capped", "v/1", "v-1", budget.Dollars(1)*3/10, 0, sec(1))
				f.task("crosser", "capped", purser.StateDone, roomy, 4*time.Second, sec(60))
				f.spend("crosser", "capped", "c/1", "c-1", budget.Dollars(1)/2, 0, sec(2))
				f.spend("crosser", "capped", "c/2", "c-1", budget.Dollars(1)*3/10, 0, sec(3))
			},
			want: []float64{0.2},
		},
		{
			name: "a run crossed after the task had stopped did not stop it",
			fill: func(f stopFixture) {
				must(f.t, f.store.SaveRun(context.Background(), purser.Run{ID: "late", Budget: &budget.Config{Hard: budget.HardLimits{USD: ptr(budget.Dollars(1)), MaxIterations: ptr(100)}}}))
				f.task("early", "late", purser.StateBlocked, roomy, 4*time.Second, sec(5))
				f.iteration("early", 1, sec(0), sec(4))
				f.call("early", "e-1", 1, sec(0), sec(3), purser.CallRefused)
				f.task("later", "late", purser.StateDone, roomy, 4*time.Second, sec(60))
				f.spend("later", "late", "l/1", "l-1", budget.Dollars(2), 0, sec(30))
			},
		},
		{
			name: "tasks not BLOCKED are not observed, whatever they crossed",
			fill: func(f stopFixture) {
				f.task("done", "r", purser.StateDone, minuteCap, 90*time.Second, sec(95))
				f.iteration("done", 1, sec(0), sec(90))
				f.task("failed", "r", purser.StateFailed, tokenCap, time.Second, sec(60))
				f.iteration("failed", 1, sec(0), sec(1))
				f.spend("failed", "r", "f/1", "", 0, 2000, sec(0.5))
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := openStore(t)
			tc.fill(stopFixture{t: t, store: store})
			f := scrape(t, dashboard.NewHandler(store, dashboard.Options{}))["purser_time_to_stop_seconds"]
			if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetHistogram() == nil {
				t.Fatalf("purser_time_to_stop_seconds: missing or not a histogram: %v", f)
			}
			h := f.GetMetric()[0].GetHistogram()
			var sum float64
			for _, w := range tc.want {
				sum += w
			}
			if h.GetSampleCount() != uint64(len(tc.want)) {
				t.Errorf("count = %d, want %d", h.GetSampleCount(), len(tc.want))
			}
			if math.Abs(h.GetSampleSum()-sum) > 1e-9 {
				t.Errorf("sum = %v s, want %v s", h.GetSampleSum(), sum)
			}
		})
	}
}
