package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/sim"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/postgres"
	"github.com/purser-dev/purser/postgres/pgtest"
	"github.com/purser-dev/purser/sqlite"
)

// sharedStore is a store as a process opens it: each process its own.
type sharedStore interface {
	purser.Store
	purser.SharedRunBudget
	purser.NamedBudgets
}

// Spec: Task hits hard cap — across processes. Two processes share a
// named run's token cap; one's agent has a reply streaming through the door
// when the other's spend crosses the cap. The crossing reaches the first
// process at once — PostgreSQL's LISTEN/NOTIFY, SQLite's data_version
// watch — not at its next poll of the ledger (an hour here, so that only
// the watch can tell): its reply is cut within a fraction of a second and
// its task stops BLOCKED, saying the run's cap acted.
func TestRunHardCapCrossedByAnotherProcessCutsTheReplyAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (a, b sharedStore)
	}{
		{"sqlite", func(t *testing.T) (sharedStore, sharedStore) {
			path := filepath.Join(t.TempDir(), "purser.db")
			var out [2]sharedStore
			for i := range out {
				s, err := sqlite.Open(context.Background(), path)
				must(t, err)
				t.Cleanup(func() { s.Close() })
				out[i] = s
			}
			return out[0], out[1]
		}},
		{"postgres", func(t *testing.T) (sharedStore, sharedStore) {
			url := pgtest.NewSchema(t)
			var out [2]sharedStore
			for i := range out {
				s, err := postgres.Open(context.Background(), url)
				must(t, err)
				t.Cleanup(func() { s.Close() })
				out[i] = s
			}
			return out[0], out[1]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storeA, storeB := tc.open(t)
			runCap := int64(50_000)
			runBudget := budget.Config{Hard: budget.HardLimits{Tokens: &runCap, MaxIterations: ptr(10)}}
			ctx := context.Background()

			// B: an agent whose reply streams for up to 20 s.
			d := &door{reqs: []wireReq{{model: sonnet, input: 1_000, maxOut: 1_000, output: 1_000, dribble: 20 * time.Second}},
				admitted: make(chan struct{}, 1)}
			fB := doorFixture(t, d, budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(5)}})
			fB.task.ID = "streaming"
			fB.cfg.Store, fB.cfg.Shared, fB.cfg.RunRefresh = storeB, storeB, time.Hour
			outB := make(chan []engine.TaskOutcome, 1)
			go func() {
				o, err := fB.engine().RunBatch(ctx, engine.Batch{Tasks: []purser.Task{fB.task}, Name: "shared", Budget: &runBudget, Parallel: 1})
				if err != nil {
					t.Error(err)
				}
				outB <- o
			}()
			select {
			case <-d.admitted:
			case <-time.After(30 * time.Second):
				t.Fatal("B's request was never admitted")
			}

			// A: a call whose agent spends 60,000 tokens, past the run's cap.
			fA := newFixture(t, "steps:\n  - usage: {inputTokens: 60000, outputTokens: 0}\n")
			fA.task.ID = "spender"
			fA.cfg.Store, fA.cfg.Shared, fA.cfg.RunRefresh = storeA, storeA, time.Hour
			fA.cfg.Backends = func(spec purser.BackendSpec) (purser.Backend, error) { return sim.New(spec) }
			// The crossing: the first moment A's run is at HARD.
			var crossed time.Time
			var crossedMu sync.Mutex
			fA.observe = func(ev purser.Event) {
				crossedMu.Lock()
				defer crossedMu.Unlock()
				if crossed.IsZero() && ev.Run != nil && ev.Run.Tier == budget.Hard {
					crossed = time.Now()
				}
			}
			oA, err := fA.engine().RunBatch(ctx, engine.Batch{Tasks: []purser.Task{fA.task}, Name: "shared", Budget: &runBudget, Parallel: 1})
			must(t, err)
			if !engine.IsBudgetStop(oA[0].Err) {
				t.Fatalf("A: %v, want a stop by the run's cap", oA[0].Err)
			}

			var oB []engine.TaskOutcome
			select {
			case oB = <-outB:
			case <-time.After(15 * time.Second):
				t.Fatal("B's reply was not cut: the crossing never reached it")
			}
			d.mu.Lock()
			cut := d.cutAt
			d.mu.Unlock()
			crossedMu.Lock()
			lag := cut.Sub(crossed)
			crossedMu.Unlock()
			t.Logf("B's reply cut %s after A's spend crossed the run's cap", lag)
			if cut.IsZero() || lag > time.Second {
				t.Fatalf("B's reply cut %s after the crossing, want at once (well under the 500 ms poll on a quiet machine)", lag)
			}
			var be *budget.BudgetExhaustedError
			if !errors.As(oB[0].Err, &be) || be.Scope != budget.ScopeRun || be.Metric != budget.Tokens {
				t.Fatalf("B: %v, want the run's hard cap on tokens", oB[0].Err)
			}
		})
	}
}

// Spec: Task hits hard cap — two processes sharing a run's cap, every
// request of both agents admitted at the door through the database: the
// run's spend never passes the cap (not by one reply), at least one task
// stops BLOCKED by the run's cap, and the ledger holds what the provider
// billed. Without admission at the door, the same agents pass it.
func TestTwoProcessesShareARunCapAtTheDoor(t *testing.T) {
	stores := map[string]func(t *testing.T) (a, b sharedStore){
		"sqlite": func(t *testing.T) (sharedStore, sharedStore) {
			path := filepath.Join(t.TempDir(), "purser.db")
			var out [2]sharedStore
			for i := range out {
				s, err := sqlite.Open(context.Background(), path)
				must(t, err)
				t.Cleanup(func() { s.Close() })
				out[i] = s
			}
			return out[0], out[1]
		},
		"postgres": func(t *testing.T) (sharedStore, sharedStore) {
			url := pgtest.NewSchema(t)
			var out [2]sharedStore
			for i := range out {
				s, err := postgres.Open(context.Background(), url)
				must(t, err)
				t.Cleanup(func() { s.Close() })
				out[i] = s
			}
			return out[0], out[1]
		},
	}
	for _, tc := range []struct {
		store    string
		noAdmit  bool
		wantOver bool
	}{
		{"sqlite", false, false},
		{"postgres", false, false},
		{"sqlite", true, true},
	} {
		name := tc.store
		if tc.noAdmit {
			name += ", without admission at the door"
		}
		t.Run(name, func(t *testing.T) {
			a, b := stores[tc.store](t)
			runCap := int64(52_000)
			runBudget := budget.Config{Hard: budget.HardLimits{Tokens: &runCap, MaxIterations: ptr(10)}}
			// Each agent wants 8 requests of 5,000 tokens: 80,000 together;
			// the cap has room for 10 and a bit.
			r := wireReq{model: sonnet, input: 3_000, maxOut: 2_000, output: 2_000}
			var doors [2]*door
			var outcomes [2][]engine.TaskOutcome
			var wg sync.WaitGroup
			for i, s := range []sharedStore{a, b} {
				doors[i] = &door{reqs: repeat(8, r), noAdmit: tc.noAdmit}
				f := doorFixture(t, doors[i], budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(1)}})
				f.task.ID = []string{"first", "second"}[i]
				f.task.Degrade = purser.DegradePolicy{}
				f.cfg.Store, f.cfg.Shared = s, s
				e := f.engine()
				wg.Add(1)
				go func() {
					defer wg.Done()
					o, err := e.RunBatch(context.Background(), engine.Batch{Tasks: []purser.Task{f.task}, Name: "shared", Budget: &runBudget, Parallel: 1})
					if err != nil {
						t.Error(err)
					}
					outcomes[i] = o
				}()
			}
			wg.Wait()
			rec, err := a.Task(context.Background(), "first")
			must(t, err)
			total, err := a.RunUsageTotals(context.Background(), rec.RunID)
			must(t, err)
			if tc.wantOver {
				if total.Tokens <= runCap {
					t.Fatalf("the run spent %d tokens without admission at the door: the test no longer shows an overshoot", total.Tokens)
				}
				return
			}
			if total.Tokens > runCap {
				t.Fatalf("the run spent %d tokens, past its cap of %d", total.Tokens, runCap)
			}
			blocked := 0
			for i, o := range outcomes {
				var be *budget.BudgetExhaustedError
				var short *budget.InsufficientBudgetError
				if errors.As(o[0].Err, &be) && be.Scope == budget.ScopeRun || errors.As(o[0].Err, &short) && short.Scope == budget.ScopeRun {
					blocked++
					// Its door refused a request, or its call was refused
					// before the agent sent any.
					if len(doors[i].refused) == 0 && len(doors[i].grants) > 0 {
						t.Errorf("process %d stopped by the run's cap mid-call without its door saying so", i)
					}
				}
			}
			if blocked == 0 {
				t.Fatalf("no task stopped by the run's cap (%v, %v)", outcomes[0][0].Err, outcomes[1][0].Err)
			}
		})
	}
}
