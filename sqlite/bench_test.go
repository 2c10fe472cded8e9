package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/sqlite"
)

func entry(i int) purser.LedgerEntry {
	return purser.LedgerEntry{Key: fmt.Sprintf("call-%d/1", i), TaskID: "task", RunID: "run", CallID: fmt.Sprintf("call-%d", i),
		Event: budget.UsageEvent{InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 800, USD: 12_345, CostSource: budget.CostEstimated}}
}

// BenchmarkAppendUsage makes one usage event durable per transaction, as the
// engine does for each streamed event, at each durability: "normal"
// (WAL, synchronous=NORMAL: survives Purser being killed) and "full"
// (synchronous=FULL: an fsync per commit, survives a power cut).
func BenchmarkAppendUsage(b *testing.B) {
	for _, d := range []sqlite.Durability{sqlite.SurvivesCrash, sqlite.SurvivesPowerLoss} {
		b.Run("durability="+string(d), func(b *testing.B) {
			s, err := sqlite.OpenWith(context.Background(), filepath.Join(b.TempDir(), "p.db"), sqlite.Options{Durability: d})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			i := 0
			for b.Loop() {
				if err := s.AppendUsage(context.Background(), entry(i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkUsageTotals reads a task's totals (what `purser status` and a
// resume read) after 10 and after 1,000,000 ledger events.
func BenchmarkUsageTotals(b *testing.B) {
	for _, n := range []int{10, 1_000_000} {
		b.Run(fmt.Sprintf("after-%d-events", n), func(b *testing.B) {
			ctx := context.Background()
			s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "p.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			const batch = 20_000
			for i := 0; i < n; i += batch {
				es := make([]purser.LedgerEntry, 0, batch)
				for j := i; j < min(i+batch, n); j++ {
					es = append(es, entry(j))
				}
				if err := s.AppendUsage(ctx, es...); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				t, err := s.UsageTotals(ctx, "task")
				if err != nil || t.Tokens != int64(n)*1500 {
					b.Fatalf("totals %+v, %v", t, err)
				}
			}
		})
	}
}

// BenchmarkAppendUsageGrouped is issue 24's figure: what one usage event
// costs to make durable, against a one-row transaction on the same kind of
// database (WAL, synchronous=NORMAL, BEGIN IMMEDIATE) in the same run. A
// call's events come one after another ("sequential", the engine's usage
// sink, which makes each durable before the budget acts on it), or from
// several goroutines at once (a backend that reports from more than one, the
// tasks of a run): then those that arrive while one commits share the next
// transaction.
func BenchmarkAppendUsageGrouped(b *testing.B) {
	ctx := context.Background()
	b.Run("baseline=one-row-transaction", func(b *testing.B) {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "one.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		if _, err := db.Exec(`CREATE TABLE one (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)`); err != nil {
			b.Fatal(err)
		}
		i := 0
		m := startIOMeter()
		for b.Loop() {
			tx, err := db.BeginTx(ctx, nil)
			if err == nil {
				_, err = tx.Exec(`INSERT INTO one (k, v) VALUES (?, ?)`, i, i)
			}
			if err == nil {
				err = tx.Commit()
			}
			if err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/event")
		m.report(b)
	})
	for _, goroutines := range []int{1, 4, 16} {
		name := fmt.Sprintf("goroutines=%d", goroutines)
		if goroutines == 1 {
			name = "sequential"
		}
		b.Run(name, func(b *testing.B) {
			s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "p.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var next atomic.Int64
			b.SetParallelism(goroutines) // × GOMAXPROCS goroutines
			m := startIOMeter()
			if goroutines == 1 {
				for b.Loop() {
					if err := s.AppendUsage(ctx, entry(int(next.Add(1)))); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := s.AppendUsage(ctx, entry(int(next.Add(1)))); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/event")
			m.report(b)
			if tot, err := s.UsageTotals(ctx, "task"); err != nil || tot.Tokens != int64(b.N)*1500 {
				b.Fatalf("totals %+v, %v: want every event once", tot, err)
			}
		})
	}
}

// BenchmarkAppendUsageCall is a call's events made durable, 10 events a
// call: one transaction per event as the engine's usage sink appends them
// today ("one-per-transaction"), or the call's events in one transaction
// ("call-per-transaction", what AppendUsage takes when given them together).
// Figures are per event; the baseline is BenchmarkAppendUsageGrouped's
// one-row transaction.
func BenchmarkAppendUsageCall(b *testing.B) {
	const perCall = 10
	ctx := context.Background()
	callEntry := func(i int) purser.LedgerEntry {
		e := entry(i / perCall)
		e.Key = fmt.Sprintf("%s-%d", e.Key, i%perCall)
		return e
	}
	for _, batched := range []bool{false, true} {
		name := "one-per-transaction"
		if batched {
			name = "call-per-transaction"
		}
		b.Run(name, func(b *testing.B) {
			s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "p.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			m := startIOMeter()
			events := 0
			for b.Loop() {
				var err error
				if batched {
					es := make([]purser.LedgerEntry, perCall)
					for j := range es {
						es[j] = callEntry(events + j)
					}
					err = s.AppendUsage(ctx, es...)
					events += perCall
				} else {
					err = s.AppendUsage(ctx, callEntry(events))
					events++
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			m.reportPer(b, events)
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(events), "µs/event")
			if tot, err := s.UsageTotals(ctx, "task"); err != nil || tot.Tokens != int64(events)*1500 {
				b.Fatalf("totals %+v, %v: want every event once", tot, err)
			}
		})
	}
}

// ioMeter measures what a benchmark wrote (write(2) bytes, /proc/self/io's
// wchar: the WAL frames, whatever the machine's load) and the CPU it used,
// per operation: figures that a loaded machine does not blur as it does
// wall time.
type ioMeter struct {
	wchar int64
	cpu   time.Duration
}

func startIOMeter() ioMeter { return ioMeter{wchar: wchar(), cpu: selfCPU()} }

func (m ioMeter) report(b *testing.B) { m.reportPer(b, b.N) }

// reportPer reports what was written and the CPU used per event, of events.
func (m ioMeter) reportPer(b *testing.B, events int) {
	b.ReportMetric(float64(wchar()-m.wchar)/float64(events), "B-written/event")
	b.ReportMetric(float64((selfCPU()-m.cpu).Microseconds())/float64(events), "cpu-µs/event")
}

func wchar() int64 {
	data, _ := os.ReadFile("/proc/self/io")
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
