package engine

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

// BenchmarkCallLedger is the engine's path for a call's usage events into
// SQLite, 10 events a call reported back to back (as a CLI's stream or the
// door's replies bring them in bursts), per event:
//   - "sequential": each event appended on its own before the next (the
//     usage sink before the write-behind);
//   - "write-behind": the call's ledgerWriter, flushed at the call's end;
//   - "baseline=one-row-transaction": a one-row INSERT transaction in the
//     same run.
//
// It reports transactions, bytes written (write(2), the WAL frames) and CPU
// per event: figures the machine's load does not blur as it does wall time.
func BenchmarkCallLedger(b *testing.B) {
	const perCall = 10
	ctx := context.Background()
	b.Run("baseline=one-row-transaction", func(b *testing.B) { benchOneRow(b) })
	for _, mode := range []string{"sequential", "write-behind"} {
		b.Run(mode, func(b *testing.B) {
			st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "p.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			store := &countingAppends{Store: st}
			calls := 0
			m := startMeter()
			for b.Loop() {
				callID := fmt.Sprintf("call-%d", calls)
				calls++
				if mode == "sequential" {
					for i := 1; i <= perCall; i++ {
						if err := store.AppendUsage(ctx, benchEntry(callID, i)); err != nil {
							b.Fatal(err)
						}
					}
					continue
				}
				w := newLedgerWriter(ctx, store, nil)
				for i := 1; i <= perCall; i++ {
					if err := w.append(benchEntry(callID, i)); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.close(); err != nil {
					b.Fatal(err)
				}
			}
			events := calls * perCall
			m.report(b, events)
			b.ReportMetric(float64(events)/float64(store.txs.Load()), "events/transaction")
			if tot, err := st.UsageTotals(ctx, "task"); err != nil || tot.Tokens != int64(events)*1500 {
				b.Fatalf("totals %+v, %v: want every event once", tot, err)
			}
		})
	}
}

func benchEntry(callID string, i int) purser.LedgerEntry {
	return purser.LedgerEntry{Key: fmt.Sprintf("%s/%d", callID, i), TaskID: "task", RunID: "run", CallID: callID, Iteration: 1,
		Kind: purser.CallMain, At: time.Unix(1_700_000_000, 0),
		Event: budget.UsageEvent{InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 800, USD: 12_345, CostSource: budget.CostEstimated, Model: "m"}}
}

// benchOneRow is a one-row transaction on the same SQLite settings.
func benchOneRow(b *testing.B) {
	ctx := context.Background()
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
	m := startMeter()
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
	m.report(b, b.N)
}

// countingAppends counts AppendUsage's transactions.
type countingAppends struct {
	purser.Store
	txs atomic.Int64
}

func (c *countingAppends) AppendUsage(ctx context.Context, entries ...purser.LedgerEntry) error {
	c.txs.Add(1)
	return c.Store.AppendUsage(ctx, entries...)
}

// meter is what a benchmark wrote (/proc/self/io's wchar) and the CPU it
// used.
type meter struct {
	wchar int64
	cpu   time.Duration
	start time.Time
}

func startMeter() meter { return meter{wchar: wchar(), cpu: selfCPU(), start: time.Now()} }

func (m meter) report(b *testing.B, events int) {
	b.ReportMetric(float64(wchar()-m.wchar)/float64(events), "B-written/event")
	b.ReportMetric(float64((selfCPU()-m.cpu).Microseconds())/float64(events), "cpu-µs/event")
	b.ReportMetric(float64(time.Since(m.start).Microseconds())/float64(events), "µs/event")
}

func wchar() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
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
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
