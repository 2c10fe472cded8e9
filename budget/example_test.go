package budget_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/purser-dev/purser/budget"
)

// cents is exact: money is integer nano-dollars, never a float.
const cents budget.USD = budget.NanosPerDollar / 100

// A budget is the spec's TaskBudgetConfig; JSON (or YAML, through the config
// package, which also gives file:line:column errors) reads it exactly, and
// Validate says which field is wrong.
func ExampleConfig() {
	var cfg budget.Config
	err := json.Unmarshal([]byte(`{
		"optimal": {"usd": 1.2, "tokens": 150000},
		"warning": {"usd": 2.0},
		"hard":    {"usd": 3.0, "tokens": 200000, "timeMinutes": 30, "maxIterations": 8}
	}`), &cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println("valid:", cfg.Validate() == nil)
	fmt.Println("hard cap:", *cfg.Hard.USD, "exactly", int64(*cfg.Hard.USD), "nano-dollars")

	bad := cfg
	bad.Warning.USD = new(100 * cents)
	fmt.Println("warning below optimal:", bad.Validate())
	fmt.Println("no iteration cap:", budget.Config{}.Validate())
	// Output:
	// valid: true
	// hard cap: $3.00 exactly 3000000000 nano-dollars
	// warning below optimal: warning.usd: must be at least optimal.usd ($1.20), got $1.00
	// no iteration cap: hard.maxIterations: is required: an integer of at least 1
}

// A Manager tracks one budget: each usage event moves it through the tiers,
// and a listener hears each change at once, from the goroutine that recorded
// the usage that caused it.
func ExampleManager_RecordUsage() {
	cfg := budget.Config{
		Optimal: budget.Limits{USD: new(50 * cents)},
		Hard:    budget.HardLimits{USD: new(100 * cents), MaxIterations: new(10)},
	}
	m, err := budget.NewManager(cfg, budget.Options{})
	if err != nil {
		panic(err)
	}
	m.OnChange(func(c budget.Change) {
		fmt.Printf("  %s → %s by %s\n", c.From, c.To, c.Status.Cause)
	})
	for range 3 {
		tier := m.RecordUsage(budget.UsageEvent{InputTokens: 1000, OutputTokens: 200,
			USD: 35 * cents, CostSource: budget.CostReported, Model: "claude-sonnet-4-5"})
		fmt.Println("after a $0.35 call:", tier)
	}
	fmt.Println("check:", m.Check())
	// Output:
	// after a $0.35 call: optimal
	//   optimal → warning by money
	// after a $0.35 call: warning
	//   warning → hard by money
	// after a $0.35 call: hard
	// check: budget exhausted: task hard cap on money reached ($1.05 used of $1.00)
}

// A Status is the spec's BudgetStatus: what was used, and each configured
// metric's share of its thresholds. A metric nobody configured has no
// percentage (null in JSON), never 0%.
func ExampleManager_Status() {
	cfg := budget.Config{
		Optimal: budget.Limits{USD: new(120 * cents)},
		Hard:    budget.HardLimits{USD: new(300 * cents), Tokens: new(int64(200_000)), MaxIterations: new(8)},
	}
	m, err := budget.NewManager(cfg, budget.Options{})
	if err != nil {
		panic(err)
	}
	m.RecordUsage(budget.UsageEvent{InputTokens: 40_000, OutputTokens: 10_000, USD: 150 * cents, CostSource: budget.CostReported})
	// Estimated from the price catalogue, not reported by the backend.
	m.RecordUsage(budget.UsageEvent{InputTokens: 8_000, OutputTokens: 2_000, USD: 30 * cents, CostSource: budget.CostEstimated})
	m.RecordUsage(budget.UsageEvent{IterationEnd: true})

	st := m.Status()
	fmt.Println("tier:", st.Tier, "because of", st.Cause)
	fmt.Println("used:", st.UsedUSD, st.USDSource, "and", st.UsedTokens, "tokens in", st.UsedIterations, "iteration")
	fmt.Printf("money: %.0f%% of optimal, %.0f%% of hard\n", st.USDPctOfOptimal.Value, st.USDPctOfHard.Value)
	fmt.Printf("tokens: %.0f%% of hard; of optimal configured: %v\n", st.TokensPctOfHard.Value, st.TokensPctOfOptimal.Valid)
	out, _ := json.Marshal(st)
	fmt.Println(string(out))
	// Output:
	// tier: warning because of money
	// used: $1.80 estimated and 60000 tokens in 1 iteration
	// money: 150% of optimal, 60% of hard
	// tokens: 30% of hard; of optimal configured: false
	// {"tier":"warning","usedUsd":1.8,"usedTokens":60000,"usedTimeMs":0,"usedIterations":1,"usdPctOfOptimal":150,"usdPctOfHard":60,"tokensPctOfOptimal":null,"tokensPctOfHard":30,"timePctOfOptimal":null,"timePctOfHard":null,"isInWarning":true,"isAtHardCap":false,"usdSource":"estimated"}
}

// Reserve admits a call before it starts: it holds the call's worst case on
// the task's budget and its run's, so concurrent calls can never together
// pass a hard cap. Record moves streamed usage out of the hold; Release
// gives back what the call did not use.
func ExampleManager_Reserve() {
	run, err := budget.NewManager(budget.Config{Hard: budget.HardLimits{USD: new(100 * cents), MaxIterations: new(100)}},
		budget.Options{Scope: budget.ScopeRun})
	if err != nil {
		panic(err)
	}
	task, err := budget.NewManager(budget.Config{Hard: budget.HardLimits{MaxIterations: new(10)}},
		budget.Options{Parent: run})
	if err != nil {
		panic(err)
	}

	r, err := task.Reserve(budget.Amount{USD: 60 * cents})
	if err != nil {
		panic(err)
	}
	fmt.Println("held on the run:", run.Reserved().USD, "available:", task.Available().USD)

	// A second call that would need $0.60 as well does not fit beside it.
	_, err = task.Reserve(budget.Amount{USD: 60 * cents})
	var short *budget.InsufficientBudgetError
	if errors.As(err, &short) {
		fmt.Println("refused:", short.Scope, "budget has", short.Available.USD, "left")
	}

	r.Record(budget.UsageEvent{OutputTokens: 500, USD: 25 * cents, CostSource: budget.CostReported})
	fmt.Println("after $0.25 streamed: used", run.Status().UsedUSD, "held", r.Held().USD)
	r.Release()
	fmt.Println("after release: held", run.Reserved().USD, "available", task.Available().USD)
	// Output:
	// held on the run: $0.60 available: $0.40
	// refused: run budget has $0.40 left
	// after $0.25 streamed: used $0.25 held $0.35
	// after release: held $0.00 available $0.75
}

// A budget at its hard cap refuses work with a *BudgetExhaustedError, which
// says whose budget, which metric and by how much. Retrying it is never right.
func ExampleBudgetExhaustedError() {
	m, err := budget.NewManager(budget.Config{Hard: budget.HardLimits{Tokens: new(int64(10_000)), MaxIterations: new(5)}},
		budget.Options{})
	if err != nil {
		panic(err)
	}
	m.RecordUsage(budget.UsageEvent{InputTokens: 9_000, OutputTokens: 1_500})

	_, err = m.Reserve(budget.Amount{Tokens: 4_000})
	var exhausted *budget.BudgetExhaustedError
	if errors.As(err, &exhausted) {
		fmt.Println(exhausted.Scope, exhausted.Metric, exhausted.Status.UsedTokens, "of", exhausted.Limit)
		fmt.Println(err)
	}
	// Output:
	// task tokens 10500 of 10000
	// budget exhausted: task hard cap on tokens reached (10500 used of 10000)
}

// callUnderBudget is the README's "Using the budget core from Go" snippet
// (TestReadmeSnippetIsCompiled keeps the two the same): a task's budget
// inside a run's, a listener that cancels the call in flight at the hard
// cap, and a call admitted by a reservation.
func callUnderBudget(cfg budget.Config, runBudget *budget.Manager, worstCaseUSD budget.USD, worstCaseTokens int64,
	cancelCallInFlight func(), streamedUsage budget.UsageEvent) error {
	// README snippet begins.
	m, err := budget.NewManager(cfg, budget.Options{Parent: runBudget}) // a task's budget inside a run's
	if err != nil {
		return err // the budget is invalid; the error names the field
	}
	m.OnChange(func(c budget.Change) {
		if c.To == budget.Hard {
			cancelCallInFlight()
		}
	})

	if err := m.Check(); err != nil {
		return err // *budget.BudgetExhaustedError: never retried
	}

	r, err := m.Reserve(budget.Amount{USD: worstCaseUSD, Tokens: worstCaseTokens})
	var short *budget.InsufficientBudgetError
	if errors.As(err, &short) {
		return err // shrink the call to short.Available and reserve again, or stop
	}
	if err != nil {
		return err
	}
	defer r.Release()       // what the call did not use
	r.Record(streamedUsage) // as usage streams in; moves it out of the hold
	// README snippet ends.
	return nil
}

// The README's snippet at work on three tasks of one run: the second task's
// call crosses its own hard cap, and its listener cancels the call; the
// third task's call does not fit in what is left of the run's budget.
func Example_callUnderABudget() {
	runBudget, err := budget.NewManager(budget.Config{Hard: budget.HardLimits{USD: new(100 * cents), MaxIterations: new(100)}},
		budget.Options{Scope: budget.ScopeRun})
	if err != nil {
		panic(err)
	}
	taskBudget := budget.Config{Hard: budget.HardLimits{USD: new(50 * cents), MaxIterations: new(10)}}
	cancel := func() { fmt.Println("  the task's hard cap is crossed: cancel the call in flight") }
	for i, spent := range []budget.USD{30 * cents, 60 * cents, 10 * cents} {
		usage := budget.UsageEvent{InputTokens: 2_000, USD: spent, CostSource: budget.CostReported}
		err := callUnderBudget(taskBudget, runBudget, 40*cents, 4_000, cancel, usage)
		fmt.Printf("task %d: %v\n", i+1, err)
	}
	fmt.Println("the run spent", runBudget.Status().UsedUSD, "and holds", runBudget.Reserved().USD)
	// Output:
	// task 1: <nil>
	//   the task's hard cap is crossed: cancel the call in flight
	// task 2: <nil>
	// task 3: insufficient budget: call needs up to $0.40, run budget has $0.10 left under its hard cap
	// the run spent $0.90 and holds $0.00
}

// TestReadmeSnippetIsCompiled checks that the Go snippet of README.md's
// "Using the budget core from Go" is, line for line, the body of
// callUnderBudget, so the README shows code that compiles and runs.
func TestReadmeSnippetIsCompiled(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "## Using the budget core from Go\n")
	if !ok {
		t.Fatal(`README.md has no "## Using the budget core from Go" section`)
	}
	_, after, ok = strings.Cut(after, "```go\n")
	if !ok {
		t.Fatal("the README section has no ```go block")
	}
	snippet, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal("the README's ```go block is not closed")
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "// README snippet begins.\n")
	body, _, _ = strings.Cut(body, "\t// README snippet ends.")
	if got, want := trimmedLines(snippet), trimmedLines(body); got != want {
		t.Errorf("README.md's snippet and callUnderBudget differ; make them the same.\nREADME:\n%s\nexample_test.go:\n%s", got, want)
	}
}

// trimmedLines drops indentation, so the README can show the snippet
// unindented while the example keeps gofmt's tabs.
func trimmedLines(s string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		b.WriteString(strings.TrimSpace(sc.Text()))
		b.WriteByte('\n')
	}
	return b.String()
}
