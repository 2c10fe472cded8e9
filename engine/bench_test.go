package engine_test

import (
	"fmt"
	"os/exec"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/internal/procgroup"
	"github.com/purser-dev/purser/sandbox"
	"github.com/purser-dev/purser/validate"
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

// BenchmarkIterationCost runs tasks of 25, 200 and 1,600 iterations (each
// a sim call and a failing validator) and reports the cost of one
// iteration, in wall time and in CPU (this process and every child it
// waited for: the validators, their boxes and supervisors): flat in the
// task's length, since the prompt's history is windowed and the ledger
// keeps running totals. The validators run as purser runs them: boxed
// (sandbox=on, purser's default; skipped where no box can be made), in the
// task's resident box, with this test binary as the box's init as purser's
// binary is; and unboxed (sandbox=off) under the supervisor
// (procgroup.Supervise), in the task's resident supervisor. The resident
// box or supervisor is closed and waited for before the CPU is read:
// getrusage counts a child only once it has been waited for.
// BenchmarkValidatorSpawn is the baseline to set them against.
func BenchmarkIterationCost(b *testing.B) {
	procgroup.Supervise()
	defer procgroup.DisableSupervision()
	for _, boxed := range []bool{true, false} {
		name := map[bool]string{true: "sandbox=on", false: "sandbox=off"}[boxed]
		b.Run(name, func(b *testing.B) {
			if err := sandbox.Available(); boxed && err != nil {
				b.Skip(err)
			}
			for _, n := range []int{25, 200, 1600} {
				b.Run(fmt.Sprintf("iterations=%d", n), func(b *testing.B) { benchmarkIterations(b, n, boxed) })
			}
		})
	}
}

// benchmarkIterations is BenchmarkIterationCost for tasks of n
// iterations, their validators boxed or not.
func benchmarkIterations(b *testing.B, n int, boxed bool) {
	if n > 200 && testing.Short() {
		b.Skip("1,600 iterations take a while; run without -short")
	}
	var total, cpu, children time.Duration
	for b.Loop() {
		b.StopTimer()
		f := newFixture(b, "steps:\n  - usage: {inputTokens: 100, outputTokens: 10}\n")
		if boxed {
			f.cfg.Validators = validate.Runner{Sandbox: &validate.Sandbox{Homes: b.TempDir()}}
		}
		f.task.Validators = []purser.Validator{{Name: "never", Run: "exit 1"}}
		f.task.Budget = budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(n)}}
		f.task.Degrade = purser.DegradePolicy{}
		b.StartTimer()
		start, cpu0, children0 := time.Now(), cpuTime(), childrenCPU()
		if err := f.run(); !engine.IsBudgetStop(err) {
			b.Fatalf("run = %v", err)
		}
		// The task's resident box or supervisor (its validators') is closed
		// and waited for, so that its CPU and all it ran are in
		// RUSAGE_CHILDREN.
		validate.Close()
		total += time.Since(start)
		cpu += cpuTime() - cpu0
		children += childrenCPU() - children0
	}
	b.ReportMetric(float64(total.Microseconds())/float64(n*b.N)/1000, "ms/iteration")
	b.ReportMetric(float64(cpu.Microseconds())/float64(n*b.N)/1000, "cpu-ms/iteration")
	b.ReportMetric(float64(children.Microseconds())/float64(n*b.N)/1000, "children-cpu-ms/iteration")
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "iterations/s")
}

// BenchmarkValidatorSpawn is BenchmarkIterationCost's baseline: the
// validator alone, `sh -c "exit 1"` started and waited for with os/exec, no
// supervisor, no engine; CPU as there (this process and its children).
func BenchmarkValidatorSpawn(b *testing.B) {
	var cpu time.Duration
	for b.Loop() {
		cpu0 := cpuTime()
		_ = exec.Command("sh", "-c", "exit 1").Run()
		cpu += cpuTime() - cpu0
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/1000, "cpu-ms/spawn")
}

// childrenCPU is the CPU this process's waited-for children have used
// (the validators, their boxes and supervisors): cpuTime's share not spent
// in the engine's own process.
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuTime is the CPU this process and its waited-for children have used.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	var d time.Duration
	for _, ru := range []*syscall.Rusage{&self, &children} {
		d += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return d
}
