package engine_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// burstBackend reports a call's usage as n events back to back, as a CLI's
// stream or the door's replies bring them in bursts.
type burstBackend struct{ n int }

func (bb burstBackend) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	for range bb.n {
		report(budget.UsageEvent{InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 800, Model: req.Model})
	}
	return purser.CallResult{Text: "done"}, nil
}

// BenchmarkCallUsage is the engine's path for a call's usage events into
// SQLite, end to end (RunTask: a task of one iteration whose call reports
// 500 events back to back, a validator that passes), per event: the ledger
// transactions, the bytes written (write(2): the WAL frames) and this
// process's CPU, beside "baseline=one-row-transaction", a one-row INSERT
// transaction in the same run. The task's own work (its records, the
// validator's start, STATUS.md) is in the figure, spread over the events.
// It uses only the engine's public API, so an older build can run it.
func BenchmarkCallUsage(b *testing.B) {
	b.Run("baseline=one-row-transaction", benchOneRowTransaction)
	b.Run("engine/events-per-call=500", func(b *testing.B) { benchEngineCallUsage(b, false) })
	b.Run("engine/events-per-call=500/ledger-not-written", func(b *testing.B) { benchEngineCallUsage(b, true) })
}

// benchEngineCallUsage runs tasks of one call of 500 events until b.N events
// are in the ledger (b.N is events, as in the baseline); with discard the
// calls' entries are counted and not written, which leaves the engine's own
// work per event (pricing, the budget, redaction, the events told).
func benchEngineCallUsage(b *testing.B, discard bool) {
	const perCall = 500
	var events, txs int
	var wrote int64
	var cpu time.Duration
	for done := 0; done < b.N; done += perCall {
		b.StopTimer()
		f := newFixture(b, "steps: []\n")
		f.task.Validators = []purser.Validator{{Name: "ok", Run: "true", Timeout: 10 * time.Second}}
		store := &txCountingStore{Store: f.store, discard: discard}
		f.cfg.Store = store
		f.cfg.Backends = func(purser.BackendSpec) (purser.Backend, error) { return burstBackend{n: perCall}, nil }
		w0, c0 := wcharNow(), selfCPUNow()
		b.StartTimer()
		must(b, f.run())
		b.StopTimer()
		wrote += wcharNow() - w0
		cpu += selfCPUNow() - c0
		for _, n := range store.transactions() {
			events += n
			txs++
		}
	}
	if events%perCall != 0 || events < b.N {
		b.Fatalf("%d call events in the ledger, want whole calls of %d, at least %d", events, perCall, b.N)
	}
	b.ReportMetric(float64(events)/float64(txs), "events/transaction")
	b.ReportMetric(float64(wrote)/float64(events), "B-written/event")
	b.ReportMetric(float64(cpu.Microseconds())/float64(events), "cpu-µs/event")
}

// benchOneRowTransaction is a one-row transaction on the store's SQLite
// settings (WAL, synchronous=NORMAL).
func benchOneRowTransaction(b *testing.B) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "one.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	must(b, err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	_, err = db.Exec(`CREATE TABLE one (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)`)
	must(b, err)
	w0, c0 := wcharNow(), selfCPUNow()
	i := 0
	for b.Loop() {
		tx, err := db.BeginTx(ctx, nil)
		if err == nil {
			_, err = tx.Exec(`INSERT INTO one (k, v) VALUES (?, ?)`, i, i)
		}
		if err == nil {
			err = tx.Commit()
		}
		must(b, err)
		i++
	}
	b.ReportMetric(float64(wcharNow()-w0)/float64(b.N), "B-written/event")
	b.ReportMetric(float64((selfCPUNow()-c0).Microseconds())/float64(b.N), "cpu-µs/event")
}

// wcharNow is what this process has written so far (/proc/self/io).
func wcharNow() int64 {
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

// selfCPUNow is the CPU this process has used, its children's not.
func selfCPUNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
