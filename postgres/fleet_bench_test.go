package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/postgres"
	"github.com/purser-dev/purser/postgres/pgtest"
)

// The fleet benchmarks run N workers, each with a connection pool of its
// own (as N processes or hosts would have), against one PostgreSQL.

var fleetSizes = []int{1, 4, 16}

func openPools(b *testing.B, dbURL string, n int) []*postgres.Store {
	b.Helper()
	pools := make([]*postgres.Store, n)
	for i := range pools {
		s, err := postgres.Open(context.Background(), dbURL)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		pools[i] = s
	}
	return pools
}

// latencies reports the p50 and p99 of ds, in milliseconds, and the rate.
func latencies(b *testing.B, ds []time.Duration, elapsed time.Duration, unit string) {
	slices.Sort(ds)
	if len(ds) == 0 {
		return
	}
	pct := func(p float64) float64 { return float64(ds[int(p*float64(len(ds)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(ds))/elapsed.Seconds(), unit+"/s")
}

// Admission: a hold on the shared run budget and its release, by N
// workers at once on one run.
func BenchmarkFleetAdmission(b *testing.B) {
	for _, n := range fleetSizes {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			pools := openPools(b, pgtest.NewSchema(b), n)
			ctx := context.Background()
			caps := budget.Amount{USD: budget.UnlimitedUSD, Tokens: 1 << 60}
			var mu sync.Mutex
			var all []time.Duration
			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for _, s := range pools {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var mine []time.Duration
					for next.Add(1) <= int64(b.N) {
						t0 := time.Now()
						release, err := s.ReserveRun(ctx, "fleet", purser.Holder{}, caps, budget.Amount{Tokens: 1000}, time.Minute)
						if err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(t0))
						release()
					}
					mu.Lock()
					all = append(all, mine...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			b.StopTimer()
			latencies(b, all, time.Since(start), "admissions")
		})
	}
}

// Claim: N workers take b.N jobs off the queue until it is empty.
func BenchmarkFleetClaim(b *testing.B) {
	for _, n := range fleetSizes {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			pools := openPools(b, pgtest.NewSchema(b), n)
			ctx := context.Background()
			for i := range b.N {
				if _, err := pools[0].SubmitJob(ctx, purser.Job{TaskID: fmt.Sprintf("t%d", i), RunID: "fleet", TaskFile: "/shared/t.yaml"}); err != nil {
					b.Fatal(err)
				}
			}
			var mu sync.Mutex
			var all []time.Duration
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w, s := range pools {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var mine []time.Duration
					for {
						t0 := time.Now()
						_, ok, err := s.ClaimJob(ctx, fmt.Sprintf("w%d", w), time.Minute)
						if err != nil {
							b.Error(err)
							return
						}
						if !ok {
							break
						}
						mine = append(mine, time.Since(t0))
					}
					mu.Lock()
					all = append(all, mine...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			b.StopTimer()
			if len(all) != b.N {
				b.Fatalf("%d of %d jobs claimed", len(all), b.N)
			}
			latencies(b, all, time.Since(start), "claims")
		})
	}
}

// Overshoot: N workers spend on one run with a 100,000-token cap until it
// refuses them. Each call's worst case is 2,000 tokens and it uses a
// seeded random share of that; a call takes 2 ms. Purser: a hold on the
// run for the worst case (clamped to what is left) before the call, the
// actual usage appended to the ledger after. Naive: read the run's spend,
// call if it is under the cap, append after — the check-then-record rule.
func BenchmarkFleetOvershoot(b *testing.B) {
	const runCap, worst = 100_000, 2_000
	for _, n := range fleetSizes {
		for _, mode := range []string{"purser", "naive"} {
			b.Run(fmt.Sprintf("workers=%d/%s", n, mode), func(b *testing.B) {
				var over int64
				for i := range b.N {
					pools := openPools(b, pgtest.NewSchema(b), n)
					over += overshoot(b, pools, mode == "purser", runCap, worst, uint64(i))
				}
				b.ReportMetric(float64(over)/float64(b.N), "overshoot-tokens")
				b.ReportMetric(float64(over)/float64(b.N)/runCap*100, "overshoot-%")
			})
		}
	}
}

func overshoot(b *testing.B, pools []*postgres.Store, admit bool, runCap, worst int64, seed uint64) int64 {
	ctx := context.Background()
	caps := budget.Amount{USD: budget.UnlimitedUSD, Tokens: runCap}
	var wg sync.WaitGroup
	var seq atomic.Int64
	for w, s := range pools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for {
				want := int64(worst)
				release := func() {}
				if admit {
					r, err := s.ReserveRun(ctx, "fleet", purser.Holder{}, caps, budget.Amount{Tokens: want}, time.Minute)
					var short *budget.InsufficientBudgetError
					if errors.As(err, &short) && short.Available.Tokens >= 100 {
						want = short.Available.Tokens // clamped, as the engine clamps max_tokens
						r, err = s.ReserveRun(ctx, "fleet", purser.Holder{}, caps, budget.Amount{Tokens: want}, time.Minute)
					}
					if err != nil {
						return
					}
					release = r
				} else {
					spent, err := s.RunUsageTotals(ctx, "fleet")
					if err != nil || spent.Tokens >= runCap {
						return
					}
				}
				time.Sleep(2 * time.Millisecond)
				used := 1 + rng.Int64N(want)
				if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: fmt.Sprint(seq.Add(1)), TaskID: fmt.Sprintf("t%d", w), RunID: "fleet",
					Event: budget.UsageEvent{OutputTokens: used}}); err != nil {
					b.Error(err)
					return
				}
				release()
			}
		}()
	}
	wg.Wait()
	spent, err := pools[0].RunUsageTotals(ctx, "fleet")
	if err != nil {
		b.Fatal(err)
	}
	return max(spent.Tokens-runCap, 0)
}
