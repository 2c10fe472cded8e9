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

	"github.com/jackc/pgx/v5/pgxpool"

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
// workers at once on one run ("purser"), beside its baseline in the same
// run: one bare guarded UPDATE of a counter row per admission
// ("bare-update"), the least a hold decided by the database can cost.
func BenchmarkFleetAdmission(b *testing.B) {
	ctx := context.Background()
	caps := budget.Amount{USD: budget.UnlimitedUSD, Tokens: 1 << 60}
	for _, n := range fleetSizes {
		b.Run(fmt.Sprintf("workers=%d/purser", n), func(b *testing.B) {
			pools := openPools(b, pgtest.NewSchema(b), n)
			admissions(b, n, func(w int) (func(), error) {
				return pools[w].ReserveRun(ctx, "fleet", purser.Holder{}, caps, budget.Amount{Tokens: 1000}, time.Minute)
			})
		})
		for _, release := range []bool{false, true} {
			name := "bare-update"
			if release {
				name = "bare-update-and-release"
			}
			b.Run(fmt.Sprintf("workers=%d/%s", n, name), func(b *testing.B) { bareAdmissions(b, n, release) })
		}
	}
}

// bareAdmissions is BenchmarkFleetAdmission's baseline: one guarded UPDATE
// of a counter row per admission, and with release a second UPDATE that
// gives it back (the floor of a hold that is released, two statements).
func bareAdmissions(b *testing.B, n int, release bool) {
	ctx := context.Background()
	dbURL := pgtest.NewSchema(b)
	pools := make([]*pgxpool.Pool, n)
	for i := range pools {
		p, err := pgxpool.New(ctx, dbURL)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Close)
		pools[i] = p
	}
	if _, err := pools[0].Exec(ctx, `CREATE TABLE bare (id TEXT PRIMARY KEY, held BIGINT NOT NULL, cap BIGINT NOT NULL);
		INSERT INTO bare VALUES ('fleet', 0, 1::bigint << 60)`); err != nil {
		b.Fatal(err)
	}
	admissions(b, n, func(w int) (func(), error) {
		var held int64
		err := pools[w].QueryRow(ctx, `UPDATE bare SET held = held + $2 WHERE id = $1 AND held + $2 <= cap RETURNING held`, "fleet", int64(1000)).Scan(&held)
		if !release {
			return func() {}, err
		}
		return func() {
			if _, err := pools[w].Exec(ctx, `UPDATE bare SET held = held - $2 WHERE id = $1`, "fleet", int64(1000)); err != nil {
				b.Error(err)
			}
		}, err
	})
}

// admissions runs b.N admissions on n workers at once, admit(w) on worker
// w, each released right after it is granted, and reports the admissions'
// latencies and rate.
func admissions(b *testing.B, n int, admit func(w int) (func(), error)) {
	var mu sync.Mutex
	var all []time.Duration
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				release, err := admit(w)
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
