package engine_test

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/engine"
)

// countingStore counts the calls the engine makes to a store, by method.
type countingStore struct {
	purser.Store
	mu    sync.Mutex
	calls map[string]int
}

func (s *countingStore) count(method string) {
	s.mu.Lock()
	s.calls[method]++
	s.mu.Unlock()
}

func (s *countingStore) taken() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

func (s *countingStore) Run(ctx context.Context, id string) (purser.Run, error) {
	s.count("Run")
	return s.Store.Run(ctx, id)
}

func (s *countingStore) Task(ctx context.Context, id string) (purser.TaskRecord, error) {
	s.count("Task")
	return s.Store.Task(ctx, id)
}

func (s *countingStore) Tasks(ctx context.Context) ([]purser.TaskRecord, error) {
	s.count("Tasks")
	return s.Store.Tasks(ctx)
}

func (s *countingStore) SaveRun(ctx context.Context, run purser.Run) error {
	s.count("SaveRun")
	return s.Store.SaveRun(ctx, run)
}

func (s *countingStore) JoinRun(ctx context.Context, run purser.Run) (purser.Run, error) {
	s.count("JoinRun")
	return s.Store.JoinRun(ctx, run)
}

func (s *countingStore) SaveRunElapsed(ctx context.Context, id string, elapsed time.Duration) error {
	s.count("SaveRunElapsed")
	return s.Store.SaveRunElapsed(ctx, id, elapsed)
}

func (s *countingStore) SaveTask(ctx context.Context, t purser.TaskRecord) error {
	s.count("SaveTask")
	return s.Store.SaveTask(ctx, t)
}

func (s *countingStore) ClaimTask(ctx context.Context, t purser.TaskRecord, ownerGone func(string) bool) error {
	s.count("ClaimTask")
	return s.Store.ClaimTask(ctx, t, ownerGone)
}

func (s *countingStore) SetTaskState(ctx context.Context, id string, state purser.TaskState, reason string) error {
	s.count("SetTaskState")
	return s.Store.SetTaskState(ctx, id, state, reason)
}

func (s *countingStore) SaveElapsed(ctx context.Context, id string, elapsed time.Duration) error {
	s.count("SaveElapsed")
	return s.Store.SaveElapsed(ctx, id, elapsed)
}

func (s *countingStore) Iterations(ctx context.Context, taskID string) ([]purser.IterationRecord, error) {
	s.count("Iterations")
	return s.Store.Iterations(ctx, taskID)
}

func (s *countingStore) Calls(ctx context.Context, taskID string) ([]purser.CallRecord, error) {
	s.count("Calls")
	return s.Store.Calls(ctx, taskID)
}

func (s *countingStore) Degrades(ctx context.Context, taskID string) ([]purser.DegradeRecord, error) {
	s.count("Degrades")
	return s.Store.Degrades(ctx, taskID)
}

func (s *countingStore) BudgetChanges(ctx context.Context, taskID string) ([]purser.BudgetChange, error) {
	s.count("BudgetChanges")
	return s.Store.BudgetChanges(ctx, taskID)
}

func (s *countingStore) Artifact(ctx context.Context, taskID, name string) ([]byte, error) {
	s.count("Artifact")
	return s.Store.Artifact(ctx, taskID, name)
}

func (s *countingStore) SaveIteration(ctx context.Context, it purser.IterationRecord) error {
	s.count("SaveIteration")
	return s.Store.SaveIteration(ctx, it)
}

func (s *countingStore) SaveCall(ctx context.Context, c purser.CallRecord) error {
	s.count("SaveCall")
	return s.Store.SaveCall(ctx, c)
}

func (s *countingStore) SaveDegrade(ctx context.Context, d purser.DegradeRecord) error {
	s.count("SaveDegrade")
	return s.Store.SaveDegrade(ctx, d)
}

func (s *countingStore) SaveBudgetChange(ctx context.Context, c purser.BudgetChange) error {
	s.count("SaveBudgetChange")
	return s.Store.SaveBudgetChange(ctx, c)
}

func (s *countingStore) SaveArtifact(ctx context.Context, taskID, name string, content []byte) error {
	s.count("SaveArtifact")
	return s.Store.SaveArtifact(ctx, taskID, name, content)
}

func (s *countingStore) Usage(ctx context.Context, taskID string) ([]purser.LedgerEntry, error) {
	s.count("Usage")
	return s.Store.Usage(ctx, taskID)
}

func (s *countingStore) CallUsage(ctx context.Context, taskID string) ([]purser.CallUsage, error) {
	s.count("CallUsage")
	return s.Store.CallUsage(ctx, taskID)
}

func (s *countingStore) UsageTotals(ctx context.Context, taskID string) (budget.Totals, error) {
	s.count("UsageTotals")
	return s.Store.UsageTotals(ctx, taskID)
}

func (s *countingStore) RunUsageTotals(ctx context.Context, runID string) (budget.Totals, error) {
	s.count("RunUsageTotals")
	return s.Store.RunUsageTotals(ctx, runID)
}

func (s *countingStore) PriceSources(ctx context.Context, taskID string) ([]purser.PriceSourceUsage, error) {
	s.count("PriceSources")
	return s.Store.PriceSources(ctx, taskID)
}

func (s *countingStore) AppendUsage(ctx context.Context, entries ...purser.LedgerEntry) error {
	s.count("AppendUsage")
	return s.Store.AppendUsage(ctx, entries...)
}

// failingValidator fails at once, with no process: what is left of an
// iteration's CPU is the engine's own (and the sim backend's and the
// store's).
type failingValidator struct{}

func (failingValidator) RunValidator(_ context.Context, _ string, v purser.Validator) purser.ValidatorResult {
	return purser.ValidatorResult{Name: v.Name, ExitCode: 1, Output: "FAIL: trailing comma rejected at parser.go:42\n"}
}

// runIterations runs the fixture's task for n iterations of one sim call
// and a failing validator, on a counting store, and returns its calls.
func runIterations(t testing.TB, n int) map[string]int {
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100, outputTokens: 10}\n")
	store := &countingStore{Store: f.store, calls: map[string]int{}}
	f.cfg.Store = store
	f.cfg.Validators = failingValidator{}
	f.cfg.Heartbeat = time.Hour // no wall-time save by the clock: only the iterations' own
	f.task.Budget = budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(n)}}
	f.task.Degrade = purser.DefaultDegradePolicy()
	if err := f.run(); !engine.IsBudgetStop(err) {
		t.Fatalf("run = %v", err)
	}
	return store.taken()
}

// An iteration's store work is what it writes, a fixed number of writes,
// and no read: nothing the engine holds in memory is read back, and
// nothing grows with the task's length.
func TestAnIterationsStoreWorkIsFlat(t *testing.T) {
	short, long := runIterations(t, 25), runIterations(t, 200)
	perIteration := map[string]int{
		"SaveIteration": 2, // started, ended
		"SaveCall":      2, // started, ended
		"AppendUsage":   2, // the call's usage (one batch), the iteration's end
		"SaveElapsed":   1, // the wall time at the iteration's end
	}
	methods := slices.Sorted(maps.Keys(long))
	for _, m := range methods {
		grew := long[m] - short[m]
		if want := perIteration[m] * (200 - 25); grew != want {
			t.Errorf("%s: %d calls in 25 iterations, %d in 200: %.2f per iteration, want %d",
				m, short[m], long[m], float64(grew)/175, perIteration[m])
		}
	}
	t.Logf("store calls in 200 iterations: %v", long)
}

// BenchmarkEngineCPU is the engine's own CPU per iteration: this process
// alone (RUSAGE_SELF), with the validator answered in-process, so that
// what it measures is the engine's work around a call (context, prompt,
// store, budget, artifacts, the sim backend), not a spawn. The fixture's
// workspace has 3 files; workspace=repo adds 800 in 40 directories and a
// .gitignore, as a small repository has, since the engine walks and lists
// the workspace. BenchmarkIterationCost (bench_test.go) is the whole
// iteration.
func BenchmarkEngineCPU(b *testing.B) {
	for _, repo := range []bool{false, true} {
		for _, n := range []int{25, 200, 1600} {
			if repo && n > 200 {
				continue
			}
			name := fmt.Sprintf("workspace=%s/iterations=%d", map[bool]string{false: "small", true: "repo"}[repo], n)
			b.Run(name, func(b *testing.B) { benchmarkEngineCPU(b, n, repo) })
		}
	}
}

func benchmarkEngineCPU(b *testing.B, n int, repo bool) {
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		f := newFixture(b, "steps:\n  - usage: {inputTokens: 100, outputTokens: 10}\n")
		if repo {
			write(b, filepath.Join(f.workspace, ".gitignore"), "/bin\n*.test\n*.prof\n.cache/\n")
			for i := range 800 {
				write(b, filepath.Join(f.workspace, fmt.Sprintf("pkg%02d/file%03d.go", i%40, i)), "package p\n")
			}
		}
		f.cfg.Validators = failingValidator{}
		f.task.Budget = budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(n)}}
		f.task.Degrade = purser.DegradePolicy{}
		b.StartTimer()
		cpu0 := selfCPU()
		if err := f.run(); !engine.IsBudgetStop(err) {
			b.Fatalf("run = %v", err)
		}
		cpu += selfCPU() - cpu0
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(n*b.N)/1000, "cpu-ms/iteration")
}

// selfCPU is the CPU this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The workspace is walked for its fingerprint only for what reads it: once
// an iteration, before its calls, for the check after a hard cap; twice
// with stuckAfter, which compares it after the calls too.
func TestTheWorkspaceIsWalkedOnlyForWhatReadsIt(t *testing.T) {
	for _, stuckAfter := range []*int{nil, ptr(100)} {
		f := newFixture(t, "steps:\n  - usage: {inputTokens: 100, outputTokens: 10}\n")
		f.cfg.Validators = failingValidator{}
		f.task.Budget = budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(10)}, StuckAfter: stuckAfter}
		taken, undo := engine.CountFingerprints(f.workspace)
		if err := f.run(); !engine.IsBudgetStop(err) {
			t.Fatalf("run = %v", err)
		}
		undo()
		want := int64(10)
		if stuckAfter != nil {
			want = 20
		}
		if got := taken(); got != want {
			t.Errorf("stuckAfter %v: %d fingerprints in 10 iterations, want %d", stuckAfter != nil, got, want)
		}
	}
}
