// Package bench holds Purser's comparative benchmarks: how far past a hard
// cap concurrent spending goes with Purser's reservations, and with the
// check-then-record rule most tools use.
package bench

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purser-dev/purser/budget"
)

// OvershootParams describe one simulation: Tasks goroutines share one run
// budget of Cap tokens; each makes calls until stopped. A call's worst case
// (its max_tokens, say) is drawn up to MaxCall; what it actually uses is a
// random share of that. Calls take up to MaxLatency, so they overlap.
type OvershootParams struct {
	Tasks      int
	Cap        int64
	MaxCall    int64
	MaxLatency time.Duration
	Seed       uint64
}

// OvershootResult is what was spent, against the cap.
type OvershootResult struct {
	Spent     int64
	Calls     int64
	Overshoot int64 // max(0, Spent − Cap)
}

// Share is the overshoot as a share of the cap.
func (r OvershootResult) Share(cap int64) float64 { return float64(r.Overshoot) / float64(cap) }

type call struct {
	worst, actual int64
	latency       time.Duration
}

func draws(p OvershootParams, task int) func() call {
	rng := rand.New(rand.NewPCG(p.Seed, uint64(task)))
	return func() call {
		worst := 1 + rng.Int64N(p.MaxCall)
		return call{worst: worst, actual: 1 + rng.Int64N(worst), latency: time.Duration(rng.Int64N(int64(p.MaxLatency) + 1))}
	}
}

// Purser runs the simulation with Purser's admission: each call reserves its
// worst case on its task's budget, which is a child of the run's; a call that
// does not fit is clamped to what is left (as the engine clamps max_tokens),
// and a task stops when nothing is left.
func Purser(p OvershootParams) OvershootResult {
	iters := 1 << 30
	run, err := budget.NewManager(budget.Config{Hard: budget.HardLimits{Tokens: &p.Cap, MaxIterations: &iters}}, budget.Options{Scope: budget.ScopeRun})
	if err != nil {
		panic(err)
	}
	var calls atomic.Int64
	var wg sync.WaitGroup
	for t := range p.Tasks {
		task, err := budget.NewManager(budget.Config{Hard: budget.HardLimits{MaxIterations: &iters}}, budget.Options{Parent: run})
		if err != nil {
			panic(err)
		}
		next := draws(p, t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c := next()
				r, err := task.Reserve(budget.Amount{Tokens: c.worst})
				var short *budget.InsufficientBudgetError
				if asInsufficient(err, &short) && short.Available.Tokens > 0 {
					c.worst = short.Available.Tokens
					c.actual = min(c.actual, c.worst) // the backend honours the clamp
					r, err = task.Reserve(budget.Amount{Tokens: c.worst})
				}
				if err != nil {
					return
				}
				time.Sleep(c.latency)
				r.Commit(budget.UsageEvent{OutputTokens: c.actual})
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	spent := run.Status().UsedTokens
	return OvershootResult{Spent: spent, Calls: calls.Load(), Overshoot: max(0, spent-p.Cap)}
}

func asInsufficient(err error, target **budget.InsufficientBudgetError) bool {
	e, ok := err.(*budget.InsufficientBudgetError)
	if ok {
		*target = e
	}
	return ok
}

// Naive runs the same simulation with check-then-record: before a call, a
// task checks that the run's spend is under the cap; it records what the call
// used when the call returns. Calls in flight are invisible to the check.
func Naive(p OvershootParams) OvershootResult {
	var spent, calls atomic.Int64
	var wg sync.WaitGroup
	for t := range p.Tasks {
		next := draws(p, t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c := next()
				if spent.Load() >= p.Cap {
					return
				}
				time.Sleep(c.latency)
				spent.Add(c.actual)
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	s := spent.Load()
	return OvershootResult{Spent: s, Calls: calls.Load(), Overshoot: max(0, s-p.Cap)}
}
