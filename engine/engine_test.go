package engine_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/sim"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/prompt"
	"github.com/purser-dev/purser/report"
	"github.com/purser-dev/purser/sqlite"
	"github.com/purser-dev/purser/validate"
)

// fixture is one task on real files: a workspace, a sim script, a
// transcript, a SQLite database and real validator processes.
type fixture struct {
	t          testing.TB
	dir        string
	workspace  string
	transcript string
	store      *sqlite.Store
	cfg        engine.Config
	eng        *engine.Engine
	task       purser.Task
	events     []purser.Event
	observe    func(purser.Event) // when set, told of every event too
	mu         sync.Mutex
}

func newFixture(t testing.TB, script string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{t: t, dir: dir, workspace: filepath.Join(dir, "ws"), transcript: filepath.Join(dir, "calls.jsonl")}
	must(t, os.MkdirAll(filepath.Join(f.workspace, "src"), 0o755))
	write(t, filepath.Join(f.workspace, "src/parser.go"), "package src\n\n// Parse parses lists.\nfunc Parse() {}\n")
	write(t, filepath.Join(f.workspace, "notes/unrelated.txt"), "nothing to see here\n")
	// The validator fails until src/fixed exists.
	write(t, filepath.Join(f.workspace, "check.sh"), "if [ -f src/fixed ]; then echo ok; else echo 'FAIL: trailing comma rejected at parser.go:42'; exit 1; fi\n")
	write(t, filepath.Join(dir, "sim.yaml"), script)
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "purser.db"))
	must(t, err)
	t.Cleanup(func() { store.Close() })
	f.store = store
	cb, err := contextbuild.New()
	must(t, err)
	f.cfg = engine.Config{
		Store:      store,
		Backends:   func(spec purser.BackendSpec) (purser.Backend, error) { return sim.New(spec) },
		Validators: validate.Runner{},
		Context:    cb,
		Artifacts:  report.Artifacts{},
		Prices:     pricing.Builtin(),
		Retry:      engine.RetryPolicy{Max: 2, Base: time.Millisecond},
		Observe: func(ev purser.Event) {
			f.mu.Lock()
			f.events = append(f.events, ev)
			observe := f.observe
			f.mu.Unlock()
			if observe != nil {
				observe(ev)
			}
		},
	}
	f.task = purser.Task{
		ID:         "fix-commas",
		Goal:       "Make the parser accept trailing commas.",
		Issue:      "Parsing `[1, 2,]` fails; see src/parser.go.",
		Workspace:  f.workspace,
		File:       filepath.Join(dir, "task.yaml"),
		Validators: []purser.Validator{{Name: "tests", Run: "sh check.sh", Timeout: 10 * time.Second}},
		Backend: purser.BackendSpec{Name: "sim", Type: "sim", Dir: dir,
			Models:  map[string]string{"cheap": "sim-small", "standard": "sim-large"},
			Options: map[string]any{"script": "sim.yaml", "transcript": "calls.jsonl"}},
		ModelTier: "standard",
		Budget:    budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(5)}},
		Degrade:   purser.DefaultDegradePolicy(),
	}
	return f
}

// engine is the fixture's engine, built on first use from f.cfg.
func (f *fixture) engine() *engine.Engine {
	f.t.Helper()
	if f.eng == nil {
		e, err := engine.New(f.cfg)
		must(f.t, err)
		f.eng = e
	}
	return f.eng
}

func (f *fixture) run() error {
	return f.engine().RunTask(context.Background(), f.task, nil, "run-1")
}

func (f *fixture) calls() []sim.TranscriptLine {
	f.t.Helper()
	data, err := os.ReadFile(f.transcript)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	must(f.t, err)
	var out []sim.TranscriptLine
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l sim.TranscriptLine
		must(f.t, json.Unmarshal(sc.Bytes(), &l))
		out = append(out, l)
	}
	return out
}

func (f *fixture) state() purser.TaskRecord {
	f.t.Helper()
	rec, err := f.store.Task(context.Background(), f.task.ID)
	must(f.t, err)
	return rec
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t testing.TB, path, content string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(t, os.WriteFile(path, []byte(content), 0o644))
}

func ptr[T any](v T) *T { return &v }

func usd(s string) *budget.USD {
	v, err := budget.ParseUSD(s)
	if err != nil {
		panic(err)
	}
	return &v
}

// A script whose first iteration costs $0.60 (past optimal $0.55: WARNING,
// reached by the self-review, the iteration's last call)
// and whose second iteration fixes the task.
const warnThenFix = `
steps:
  - usage: {inputTokens: 1000, outputTokens: 100, costUsd: 0.20}   # planning
  - usage: {inputTokens: 3000, outputTokens: 500, costUsd: 0.30}   # main, iteration 1
  - usage: {inputTokens: 1000, outputTokens: 100, costUsd: 0.10}   # self-review
  - usage: {inputTokens: 800, outputTokens: 200, costUsd: 0.05}    # main, iteration 2: the fix
    files: {src/fixed: "yes"}
`

func warnBudget() budget.Config {
	return budget.Config{
		Optimal: budget.Limits{USD: usd("0.55")},
		Hard:    budget.HardLimits{USD: usd("3"), MaxIterations: ptr(5)},
	}
}

func TestTaskWithinOptimalRangeHasAllFeatures(t *testing.T) {
	t.Parallel()
	f := newFixture(t, warnThenFix)
	f.task.Planning, f.task.SelfReview = true, true
	f.task.Budget = budget.Config{Optimal: budget.Limits{USD: usd("10")}, Hard: budget.HardLimits{MaxIterations: ptr(5)}}
	must(t, f.run())
	calls := f.calls()
	kinds := []purser.CallKind{}
	for _, c := range calls {
		kinds = append(kinds, c.Kind)
		if c.Model != "sim-large" || strings.Contains(c.Prompt, prompt.RepairOnlyLines[0]) {
			t.Fatalf("OPTIMAL call degraded: model %s, prompt %q", c.Model, c.Prompt)
		}
	}
	want := "planning main self_review planning main self_review"
	if got := strings.Trim(strings.Join(strings.Fields(strings.Trim(strings.ReplaceAll(fmtKinds(kinds), ",", " "), "[]")), " "), " "); got != want {
		t.Fatalf("calls = %s, want %s (plan regenerated, self-review each iteration)", got, want)
	}
	full := calls[1].Prompt
	for _, want := range []string{"## Goal", "## Issue", "## File src/parser.go", "func Parse()", "## Workspace files", "notes/unrelated.txt", "## Plan"} {
		if !strings.Contains(full, want) {
			t.Errorf("full context lacks %q", want)
		}
	}
	if f.state().State != purser.StateDone {
		t.Fatalf("state %s", f.state().State)
	}
}

func fmtKinds(ks []purser.CallKind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, " ")
}

// Spec: Context shrink triggered — in WARNING the configured strategy
// applies; the default keeps failing validator output and issue files.
func TestContextShrinkTriggered(t *testing.T) {
	t.Parallel()
	f := newFixture(t, warnThenFix)
	f.task.Budget = warnBudget()
	f.task.Planning, f.task.SelfReview = true, true
	f.task.Degrade = purser.DegradePolicy{Steps: []purser.DegradeStep{{Action: purser.ShrinkContext}}, Shrink: purser.ShrinkPolicy{Strategy: "failing_first", MaxTokens: 400}}
	must(t, f.run())
	calls := f.calls()
	var warnMain *sim.TranscriptLine
	for i := range calls {
		if calls[i].Kind == purser.CallMain && calls[i].Iteration == 2 {
			warnMain = &calls[i]
		}
	}
	if warnMain == nil {
		t.Fatalf("no main call in iteration 2: %+v", calls)
	}
	if warnMain.ContextTokens > 400 {
		t.Fatalf("shrunk context has %d tokens, cap 400", warnMain.ContextTokens)
	}
	for _, keep := range []string{"## Goal", "FAIL: trailing comma rejected at parser.go:42", "## File src/parser.go"} {
		if !strings.Contains(warnMain.Prompt, keep) {
			t.Errorf("shrunk context lost %q:\n%s", keep, warnMain.Prompt)
		}
	}
	for _, drop := range []string{"## Workspace files", "notes/unrelated.txt", "## Plan", "## Earlier iterations"} {
		if strings.Contains(warnMain.Prompt, drop) {
			t.Errorf("shrunk context kept %q", drop)
		}
	}
	if calls[1].ContextTokens <= warnMain.ContextTokens {
		t.Errorf("OPTIMAL context (%d tokens) not larger than the shrunk one (%d)", calls[1].ContextTokens, warnMain.ContextTokens)
	}
	assertDegrade(t, f, purser.ShrinkContext, budget.Money)
}

// Spec: Repair-only mode enabled — the prompt carries the three lines verbatim.
func TestRepairOnlyModeEnabled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, warnThenFix)
	f.task.Budget = warnBudget()
	f.task.Planning, f.task.SelfReview = true, true
	must(t, f.run())
	for _, c := range f.calls() {
		has := 0
		for _, l := range prompt.RepairOnlyLines {
			if strings.Contains(c.Prompt, "\n"+l+"\n") {
				has++
			}
		}
		wantRepair := c.Iteration == 2 && c.Kind == purser.CallMain
		if wantRepair && has != 3 {
			t.Errorf("WARNING main call has %d of the 3 repair-only lines:\n%s", has, c.Prompt)
		}
		if !wantRepair && has != 0 {
			t.Errorf("%s call of iteration %d has repair-only lines", c.Kind, c.Iteration)
		}
	}
	assertDegrade(t, f, purser.RepairOnlyMode, budget.Money)
}

// Spec: Optional calls disabled — no self-review and no plan regeneration in WARNING.
func TestOptionalCallsDisabled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, warnThenFix)
	f.task.Budget = warnBudget()
	f.task.Planning, f.task.SelfReview = true, true
	must(t, f.run())
	var it2 []purser.CallKind
	for _, c := range f.calls() {
		if c.Iteration == 2 {
			it2 = append(it2, c.Kind)
		}
	}
	if len(it2) != 1 || it2[0] != purser.CallMain {
		t.Fatalf("iteration 2 calls = %v, want only main", it2)
	}
	ds := assertDegrade(t, f, purser.DisableSelfReview, budget.Money)
	var details []string
	for _, d := range ds {
		details = append(details, d.Detail)
	}
	joined := strings.Join(details, "; ")
	if !strings.Contains(joined, "planning call skipped") || !strings.Contains(joined, "self-review call skipped") {
		t.Fatalf("degrade records = %q", joined)
	}
}

func TestSwitchTierCheap(t *testing.T) {
	t.Parallel()
	f := newFixture(t, warnThenFix)
	f.task.Budget = warnBudget()
	must(t, f.run())
	calls := f.calls()
	if calls[0].Model != "sim-large" || calls[len(calls)-1].Model != "sim-small" {
		t.Fatalf("models %s … %s, want sim-large then sim-small", calls[0].Model, calls[len(calls)-1].Model)
	}
	assertDegrade(t, f, purser.SwitchTierCheap, budget.Money)
}

// An empty policy is allowed: WARNING then changes nothing.
func TestEmptyDegradePolicy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, warnThenFix)
	f.task.Budget = warnBudget()
	f.task.Planning, f.task.SelfReview = true, true
	f.task.Degrade = purser.DegradePolicy{}
	must(t, f.run())
	last := f.calls()[len(f.calls())-1]
	if last.Kind != purser.CallSelfReview || last.Model != "sim-large" {
		t.Fatalf("last call %s on %s: the empty policy degraded something", last.Kind, last.Model)
	}
	ds, _ := f.store.Degrades(context.Background(), f.task.ID)
	if len(ds) != 0 {
		t.Fatalf("degrade records with an empty policy: %+v", ds)
	}
}

// An action staged "at: warning" waits for the warning line; the rest apply
// on entering WARNING.
func TestStagedDegradeWaitsForWarningLine(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `
steps:
  - usage: {costUsd: 0.6, inputTokens: 10}   # iteration 1: WARNING (optimal 0.5), below the warning line 1.0
  - usage: {costUsd: 0.6, inputTokens: 10}   # iteration 2: past the warning line
  - usage: {costUsd: 0.1, inputTokens: 10}
    files: {src/fixed: "yes"}
`)
	f.task.Budget = budget.Config{Optimal: budget.Limits{USD: usd("0.5")}, Warning: budget.Limits{USD: usd("1.0")}, Hard: budget.HardLimits{USD: usd("5"), MaxIterations: ptr(5)}}
	f.task.Degrade = purser.DegradePolicy{Steps: []purser.DegradeStep{{Action: purser.RepairOnlyMode}, {Action: purser.SwitchTierCheap, At: purser.AtWarningLine}}}
	must(t, f.run())
	calls := f.calls()
	if len(calls) != 3 {
		t.Fatalf("%d calls", len(calls))
	}
	if calls[1].Model != "sim-large" || !strings.Contains(calls[1].Prompt, prompt.RepairOnlyLines[0]) {
		t.Fatalf("iteration 2 (WARNING, before the line): model %s, repair-only %v", calls[1].Model, strings.Contains(calls[1].Prompt, prompt.RepairOnlyLines[0]))
	}
	if calls[2].Model != "sim-small" {
		t.Fatalf("iteration 3 (past the warning line): model %s, want sim-small", calls[2].Model)
	}
}

func assertDegrade(t *testing.T, f *fixture, a purser.DegradeAction, metric budget.Metric) []purser.DegradeRecord {
	t.Helper()
	ds, err := f.store.Degrades(context.Background(), f.task.ID)
	must(t, err)
	var out []purser.DegradeRecord
	for _, d := range ds {
		if d.Action == a {
			if d.Tier != budget.Warning || d.Metric != metric || d.Scope != budget.ScopeTask {
				t.Errorf("degrade %s recorded with tier %s metric %s scope %s", a, d.Tier, d.Metric, d.Scope)
			}
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		t.Fatalf("degrade action %s not recorded (have %+v)", a, ds)
	}
	budgetMD, err := os.ReadFile(filepath.Join(f.workspace, "BUDGET.md"))
	must(t, err)
	if !strings.Contains(string(budgetMD), "| "+string(a)+" |") {
		t.Errorf("BUDGET.md does not list degrade action %s", a)
	}
	return out
}

// runaway streams $0.40 per call over 400 ms: the third call crosses the
// $1.00 hard cap mid-stream.
const runaway = `
steps:
  - usage: {inputTokens: 4000, outputTokens: 4000, costUsd: 0.40}
    delayMs: 400
    files: {src/attempt.txt: "the agent's half-done work"}
`

// Spec: Task blocked on hard cap — stop at once; workspace preserved;
// STATUS.md, BUDGET.md and manual steps written; BLOCKED in the database.
func TestTaskBlockedOnHardCap(t *testing.T) {
	t.Parallel()
	f := newFixture(t, runaway)
	f.task.Budget = budget.Config{Optimal: budget.Limits{USD: usd("0.3")}, Hard: budget.HardLimits{USD: usd("1.0"), MaxIterations: ptr(10)}}
	gitInit(t, f.workspace)
	write(t, filepath.Join(f.workspace, "src/parser.go"), "package src\n// an uncommitted edit the user made\n")
	write(t, filepath.Join(f.workspace, "scratch.txt"), "an untracked file\n")
	before := gitStatus(t, f.workspace)

	err := f.run()
	var be *budget.BudgetExhaustedError
	if !errors.As(err, &be) || be.Metric != budget.Money || be.Scope != budget.ScopeTask {
		t.Fatalf("RunTask = %v, want BudgetExhaustedError on money", err)
	}
	calls := f.calls()
	if len(calls) != 3 || !calls[2].Cancelled || calls[0].Cancelled || calls[1].Cancelled {
		t.Fatalf("calls = %d, cancelled: %v; want the third cut off mid-call", len(calls), cancelled(calls))
	}
	// Stopped at once: the cut call recorded only what streamed before the
	// cap, far less than its $0.40.
	st := budgetOf(t, f)
	if st.UsedUSD < budget.Dollars(1) || st.UsedUSD > mustUSD(t, "1.05") {
		t.Fatalf("spent %s: want the cap reached and overshot by at most one streamed chunk", st.UsedUSD)
	}
	// Workspace preserved: the user's edits, untracked files and the agent's work.
	after := gitStatus(t, f.workspace)
	for _, line := range strings.Split(strings.TrimSpace(before), "\n") {
		if !strings.Contains(after, line) {
			t.Errorf("workspace changed: %q gone from git status\nbefore:\n%s\nafter:\n%s", line, before, after)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(f.workspace, "scratch.txt")); string(b) != "an untracked file\n" {
		t.Error("untracked file lost")
	}
	if b, _ := os.ReadFile(filepath.Join(f.workspace, "src/attempt.txt")); string(b) != "the agent's half-done work" {
		t.Error("agent's work reverted")
	}
	status := readFile(t, filepath.Join(f.workspace, "STATUS.md"))
	for _, want := range []string{"**BLOCKED**", "hard cap on **money**", "tests**: failed (exit 1)", "FAIL: trailing comma rejected",
		"## Suggested manual steps", "raise `budget.hard.usd`", "purser resume fix-commas", "## Last error"} {
		if !strings.Contains(status, want) {
			t.Errorf("STATUS.md lacks %q:\n%s", want, status)
		}
	}
	bmd := readFile(t, filepath.Join(f.workspace, "BUDGET.md"))
	for _, want := range []string{"## Per iteration", "## Per call kind", "## Per model", "## Per metric", "(reported)", "| cancelled |", "## Retries", "## Degrade actions"} {
		if !strings.Contains(bmd, want) {
			t.Errorf("BUDGET.md lacks %q", want)
		}
	}
	rec := f.state()
	if rec.State != purser.StateBlocked || !strings.Contains(rec.Reason, "hard cap on money") {
		t.Fatalf("database: %s %q", rec.State, rec.Reason)
	}
	for _, name := range []string{"STATUS.md", "BUDGET.md"} {
		art, err := f.store.Artifact(context.Background(), f.task.ID, name)
		if err != nil || !strings.Contains(string(art), "fix-commas") {
			t.Errorf("artifact %s not in the database: %v", name, err)
		}
	}
}

// Spec: No runaway loops — at the hard cap a further iteration is refused
// with BudgetExhaustedError and does not start.
func TestNoRunawayLoops(t *testing.T) {
	t.Parallel()
	f := newFixture(t, runaway)
	f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("1.0"), MaxIterations: ptr(10)}}
	_ = f.run()
	callsBefore := len(f.calls())
	its, _ := f.store.Iterations(context.Background(), f.task.ID)

	err := f.run() // as `purser resume` without a raised budget
	var be *budget.BudgetExhaustedError
	if !errors.As(err, &be) {
		t.Fatalf("second run = %v, want BudgetExhaustedError", err)
	}
	if got := len(f.calls()); got != callsBefore {
		t.Fatalf("%d calls started after the hard cap", got-callsBefore)
	}
	if its2, _ := f.store.Iterations(context.Background(), f.task.ID); len(its2) != len(its) {
		t.Fatalf("an iteration started after the hard cap: %d → %d", len(its), len(its2))
	}
	if f.state().State != purser.StateBlocked {
		t.Fatalf("state %s", f.state().State)
	}
}

func TestHardCapByIterations(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 10}\n")
	f.task.Budget = budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(3)}}
	err := f.run()
	var be *budget.BudgetExhaustedError
	if !errors.As(err, &be) || be.Metric != budget.Iterations {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.calls()); n != 3 {
		t.Fatalf("maxIterations 3 made %d calls, want exactly 3", n)
	}
}

// Resume with a raised budget: what was spent carries over.
func TestResumeAfterBudgetRaised(t *testing.T) {
	t.Parallel()
	f := newFixture(t, runaway)
	f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("1.0"), MaxIterations: ptr(10)}}
	_ = f.run()
	spent := budgetOf(t, f).UsedUSD
	write(t, filepath.Join(f.dir, "sim.yaml"), "steps:\n  - usage: {costUsd: 0.10, inputTokens: 10}\n    files: {src/fixed: \"yes\"}\n")
	f.task.Budget.Hard.USD = usd("2.0")
	must(t, f.run())
	st := budgetOf(t, f)
	if st.UsedUSD != spent+budget.Dollars(1)/10 {
		t.Fatalf("after resume spent %s, want %s + $0.10", st.UsedUSD, spent)
	}
	if f.state().State != purser.StateDone {
		t.Fatalf("state %s", f.state().State)
	}
}

// Retries: a transient error is retried through the budget check, each retry
// a recorded call; after HARD nothing is retried.
func TestNoSilentRetries(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `
steps:
  - usage: {inputTokens: 100, costUsd: 0.01}
    fail: transient
  - usage: {inputTokens: 100, costUsd: 0.01}
    files: {src/fixed: "yes"}
`)
	f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("1"), MaxIterations: ptr(3)}}
	must(t, f.run())
	calls, _ := f.store.Calls(context.Background(), f.task.ID)
	if len(calls) != 2 || calls[0].Outcome != purser.CallTransient || calls[1].Attempt != 2 || calls[1].Outcome != purser.CallOK {
		t.Fatalf("calls = %+v", calls)
	}
	if st := budgetOf(t, f); st.UsedUSD != budget.Dollars(1)/50 {
		t.Fatalf("the failed attempt's usage was not counted: %s", st.UsedUSD)
	}

	// A transient failure that crosses HARD is not retried.
	g := newFixture(t, "steps:\n  - usage: {inputTokens: 100, costUsd: 1.0}\n    fail: transient\n")
	g.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("1"), MaxIterations: ptr(3)}}
	err := g.run()
	if !engine.IsBudgetStop(err) || len(g.calls()) != 1 {
		t.Fatalf("err %v after %d calls: want a budget stop after the one call", err, len(g.calls()))
	}
}

func TestFatalBackendErrorFailsTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100}\n    fail: fatal\n")
	err := f.run()
	var se *engine.StopError
	if !errors.As(err, &se) || se.State != purser.StateFailed || engine.IsBudgetStop(err) {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.calls()); n != 1 {
		t.Fatalf("a fatal error was retried: %d calls", n)
	}
	if f.state().State != purser.StateFailed {
		t.Fatalf("state %s", f.state().State)
	}
}

// Backend has no reliable USD pricing: tokens still stop the task, and the
// artifacts say the money is unknown, not $0.
func TestNoUSDStillEnforcesTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 3000, outputTokens: 1000}\n    delayMs: 100\n")
	f.task.Budget = budget.Config{Optimal: budget.Limits{Tokens: ptr[int64](4000)}, Hard: budget.HardLimits{USD: usd("1"), Tokens: ptr[int64](10000), MaxIterations: ptr(10)}}
	err := f.run()
	var be *budget.BudgetExhaustedError
	if !errors.As(err, &be) || be.Metric != budget.Tokens {
		t.Fatalf("err = %v, want a stop by tokens", err)
	}
	st := budgetOf(t, f)
	if st.USDSource != budget.SourceUnknown || st.UsedTokens > 10000 {
		t.Fatalf("source %s, %d tokens", st.USDSource, st.UsedTokens)
	}
	bmd := readFile(t, filepath.Join(f.workspace, "BUDGET.md"))
	if !strings.Contains(bmd, "unknown") || strings.Contains(bmd, "| money | $0.00") {
		t.Fatalf("BUDGET.md does not label unknown money:\n%s", bmd)
	}
}

// Tasks of one run share its budget; reservations keep them from jointly
// overrunning it, whatever the interleaving.
func TestRunBudgetNeverOverrun(t *testing.T) {
	t.Parallel()
	run, err := budget.NewManager(budget.Config{Hard: budget.HardLimits{Tokens: ptr[int64](60_000), MaxIterations: ptr(1000)}}, budget.Options{Scope: budget.ScopeRun})
	must(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range 4 {
		f := newFixture(t, "steps:\n  - usage: {inputTokens: 50, outputTokens: 6000}\n    delayMs: 30\n")
		f.task.ID = "task-" + string(rune('a'+i))
		f.task.Budget = budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(100)}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f.engine().RunTask(context.Background(), f.task, run, "run-1")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if !engine.IsBudgetStop(err) {
			t.Fatalf("task ended with %v, want a budget stop", err)
		}
	}
	if used := run.Status().UsedTokens; used > 60_000 || used < 50_000 {
		t.Fatalf("run used %d tokens of 60000: overrun, or stopped far too early", used)
	}
}

// A signal (cancelled context) leaves the task resumable, not BLOCKED.
func TestInterruptedTaskIsResumable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100, costUsd: 0.1}\n    delayMs: 30000\n")
	f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("10"), MaxIterations: ptr(10)}}
	err := f.engine().RunTask(f.interruptAtFirstUsage(), f.task, nil, "run-1")
	if !errors.Is(err, engine.ErrInterrupted) {
		t.Fatalf("err = %v", err)
	}
	if s := f.state().State; s != purser.StatePending {
		t.Fatalf("state %s, want PENDING (resumable)", s)
	}
	if calls := f.calls(); len(calls) != 1 || !calls[0].Cancelled {
		t.Fatalf("calls %+v", calls)
	}
}

// interruptAtFirstUsage returns a context that is cancelled, as by a signal,
// when the first usage of a call arrives: the task is interrupted mid-call
// however fast or slow the machine, where a timer could fire before the call
// starts or after it ends.
func (f *fixture) interruptAtFirstUsage() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	f.t.Cleanup(cancel)
	prev := f.observe
	f.observe = func(ev purser.Event) {
		if prev != nil {
			prev(ev)
		}
		if ev.Type == purser.EventUsage {
			cancel()
		}
	}
	return ctx
}

func budgetOf(t *testing.T, f *fixture) budget.Status {
	t.Helper()
	totals, err := f.store.UsageTotals(context.Background(), f.task.ID)
	must(t, err)
	m, err := budget.NewManager(f.task.Budget, budget.Options{Initial: totals})
	must(t, err)
	return m.Status()
}

func mustUSD(t *testing.T, s string) budget.USD {
	v, err := budget.ParseUSD(s)
	must(t, err)
	return v
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return string(b)
}

func cancelled(ls []sim.TranscriptLine) []bool {
	out := make([]bool, len(ls))
	for i, l := range ls {
		out[i] = l.Cancelled
	}
	return out
}

func gitInit(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

func gitStatus(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("git", "status", "--porcelain")
	cmd.Dir = dir
	out, err := cmd.Output()
	must(t, err)
	return string(out)
}

// An iteration cut by a signal does not count against maxIterations; the
// resume runs it again under the same number.
func TestInterruptedIterationDoesNotCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100, costUsd: 0.1}\n    delayMs: 30000\n")
	f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("10"), MaxIterations: ptr(10)}}
	if err := f.engine().RunTask(f.interruptAtFirstUsage(), f.task, nil, "run-1"); !errors.Is(err, engine.ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	if st := budgetOf(t, f); st.UsedIterations != 0 {
		t.Fatalf("interrupted iteration counted: %d", st.UsedIterations)
	}
	write(t, filepath.Join(f.dir, "sim.yaml"), "steps:\n  - usage: {inputTokens: 10, costUsd: 0.01}\n    files: {src/fixed: \"yes\"}\n")
	must(t, f.run())
	its, _ := f.store.Iterations(context.Background(), f.task.ID)
	if len(its) != 1 || its[0].N != 1 || its[0].Outcome != "passed" {
		t.Fatalf("iterations after resume: %+v", its)
	}
}

// Wall time is a hard cap too: a call still running when the task's time
// runs out is cancelled at the deadline, though no usage arrives to say so.
// The call would take a minute; the cap is 300 ms.
func TestWallTimeHardCapCancelsCallInFlight(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 10}\n    delayMs: 60000\n")
	limit := budget.Minutes(300 * time.Millisecond)
	f.task.Budget = budget.Config{Hard: budget.HardLimits{TimeMinutes: &limit, MaxIterations: ptr(5)}}
	start := time.Now()
	err := f.run()
	var be *budget.BudgetExhaustedError
	if !errors.As(err, &be) || be.Metric != budget.Time {
		t.Fatalf("err = %v, want a stop by time", err)
	}
	took := time.Since(start)
	if took > 30*time.Second {
		t.Fatalf("the one-minute call was not cut at the 300 ms cap: took %s", took)
	}
	t.Logf("a 300 ms time cap stopped the task after %s", took.Round(time.Millisecond))
	if calls := f.calls(); len(calls) != 1 || !calls[0].Cancelled {
		t.Fatalf("calls %+v", calls)
	}
	if f.state().State != purser.StateBlocked {
		t.Fatalf("state %s", f.state().State)
	}
}

// A hung call is cancelled at the backend's callTimeout and retried through
// the budget; each attempt is recorded. The hung call would take a minute;
// the timeout (1 s) leaves the retry, which returns at once, room on a slow
// machine.
func TestCallTimeoutCancelsAndRetries(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 10}\n    delayMs: 60000\n  - usage: {inputTokens: 10}\n    files: {src/fixed: \"yes\"}\n")
	f.task.Backend.CallTimeout = time.Second
	start := time.Now()
	must(t, f.run())
	took := time.Since(start)
	if took > 30*time.Second {
		t.Fatalf("the one-minute call was not cut at its 1 s timeout: took %s", took)
	}
	t.Logf("a call cut at its 1 s timeout and retried: the task took %s", took.Round(time.Millisecond))
	calls, _ := f.store.Calls(context.Background(), f.task.ID)
	if len(calls) != 2 || calls[0].Outcome != purser.CallTransient || !strings.Contains(calls[0].Error, "timed out after 1s") || calls[1].Attempt != 2 {
		t.Fatalf("calls %+v", calls)
	}
}
