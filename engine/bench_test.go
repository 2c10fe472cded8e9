package engine_test

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/engine"
)

// BenchmarkTimeToStop measures, for a hard cap crossed mid-call by streamed
// usage, the time from the recording that crossed it to the task being
// BLOCKED: call cancelled, state, STATUS.md and BUDGET.md written. It
// reports the median and the worst as custom metrics.
func BenchmarkTimeToStop(b *testing.B) {
	var samples []time.Duration
	for b.Loop() {
		b.StopTimer()
		f := newFixture(b, "steps:\n  - usage: {inputTokens: 4000, outputTokens: 4000, costUsd: 0.40}\n    delayMs: 400\n")
		f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("1.0"), MaxIterations: ptr(10)}}
		var crossed, stopped time.Time
		f.observe = func(ev purser.Event) {
			switch {
			case ev.Type == "tier" && ev.Status.Tier == budget.Hard && crossed.IsZero():
				crossed = time.Now()
			case ev.Type == "stop":
				stopped = time.Now()
			}
		}
		b.StartTimer()
		if err := f.run(); !engine.IsBudgetStop(err) {
			b.Fatalf("run = %v", err)
		}
		samples = append(samples, stopped.Sub(crossed))
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "ms-median-to-blocked")
	b.ReportMetric(float64(samples[len(samples)-1].Microseconds())/1000, "ms-max-to-blocked")
}

// BenchmarkIterationCost runs tasks of 10, 100 and 1,000 iterations (each a
// sim call and a failing validator) and reports the cost of one iteration:
// flat in the task's length, since the prompt's history is windowed and the
// ledger keeps running totals.
func BenchmarkIterationCost(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("iterations=%d", n), func(b *testing.B) {
			if n > 100 && testing.Short() {
				b.Skip("a thousand iterations take a while; run without -short")
			}
			var total time.Duration
			for b.Loop() {
				b.StopTimer()
				f := newFixture(b, "steps:\n  - usage: {inputTokens: 100, outputTokens: 10}\n")
				f.task.Validators = []purser.Validator{{Name: "never", Run: "exit 1"}}
				f.task.Budget = budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(n)}}
				f.task.Degrade = purser.DegradePolicy{}
				b.StartTimer()
				start := time.Now()
				if err := f.run(); !engine.IsBudgetStop(err) {
					b.Fatalf("run = %v", err)
				}
				total += time.Since(start)
			}
			b.ReportMetric(float64(total.Microseconds())/float64(n*b.N)/1000, "ms/iteration")
			b.ReportMetric(float64(n*b.N)/total.Seconds(), "iterations/s")
		})
	}
}
