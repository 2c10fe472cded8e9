package budget_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purser-dev/purser/budget"
)

func benchConfig() budget.Config {
	return budget.Config{
		Optimal: budget.Limits{USD: usd("1000"), Tokens: ptr[int64](1 << 50)},
		Hard:    budget.HardLimits{USD: usd("1000000"), Tokens: ptr[int64](1 << 60), TimeMinutes: ptr(budget.Minutes(1000 * time.Hour)), MaxIterations: ptr(1 << 30)},
	}
}

var benchEvent = budget.UsageEvent{InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 800, USD: 12_345, CostSource: budget.CostEstimated}

// BenchmarkRecordUsage is the hot path: one streamed usage event recorded on
// a task with a run budget above it, the clock running.
func BenchmarkRecordUsage(b *testing.B) {
	run, _ := budget.NewManager(benchConfig(), budget.Options{Scope: budget.ScopeRun})
	task, _ := budget.NewManager(benchConfig(), budget.Options{Parent: run})
	task.StartClock()
	b.ReportAllocs()
	for b.Loop() {
		task.RecordUsage(benchEvent)
	}
}

// BenchmarkRecordUsageParallel records from every core onto one run budget,
// as parallel tasks of one run do.
func BenchmarkRecordUsageParallel(b *testing.B) {
	run, _ := budget.NewManager(benchConfig(), budget.Options{Scope: budget.ScopeRun})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		task, _ := budget.NewManager(benchConfig(), budget.Options{Parent: run})
		task.StartClock()
		for pb.Next() {
			task.RecordUsage(benchEvent)
		}
	})
}

// BenchmarkStatus reads the status after 10 and after 1,000,000 events: it
// must not grow with history.
func BenchmarkStatus(b *testing.B) {
	for _, n := range []int{10, 1_000_000} {
		b.Run(map[int]string{10: "after-10-events", 1_000_000: "after-1M-events"}[n], func(b *testing.B) {
			m, _ := budget.NewManager(benchConfig(), budget.Options{})
			m.StartClock()
			for range n {
				m.RecordUsage(benchEvent)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				_ = m.Status()
			}
		})
	}
}

// BenchmarkStatusParallel reads the status from every core while nothing
// records.
func BenchmarkStatusParallel(b *testing.B) {
	m, _ := budget.NewManager(benchConfig(), budget.Options{})
	m.StartClock()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = m.Status()
		}
	})
}

// BenchmarkReserveCommit is one admitted call: reserve, commit the actual usage.
func BenchmarkReserveCommit(b *testing.B) {
	run, _ := budget.NewManager(benchConfig(), budget.Options{Scope: budget.ScopeRun})
	task, _ := budget.NewManager(benchConfig(), budget.Options{Parent: run})
	b.ReportAllocs()
	for b.Loop() {
		r, err := task.Reserve(budget.Amount{USD: 20_000, Tokens: 4000})
		if err != nil {
			b.Fatal(err)
		}
		r.Commit(benchEvent)
	}
}

// BenchmarkRecordUsageBaselines are what BenchmarkRecordUsage is set
// against in the same run (docs/benchmarks.md): an atomic add; two mutexes
// taken in turn around an add (a task and its run); one reading of the
// system clock, which recording a capped wall time needs once per event.
func BenchmarkRecordUsageBaselines(b *testing.B) {
	b.Run("atomic-add", func(b *testing.B) {
		var n atomic.Int64
		for b.Loop() {
			n.Add(1500)
		}
	})
	b.Run("two-mutexes-add", func(b *testing.B) {
		var mu [2]sync.Mutex
		var n [2]int64
		for b.Loop() {
			for i := range mu {
				mu[i].Lock()
				n[i] += 1500
				mu[i].Unlock()
			}
		}
	})
	b.Run("clock-read", func(b *testing.B) {
		var t time.Time
		for b.Loop() {
			t = time.Now()
		}
		_ = t
	})
}
