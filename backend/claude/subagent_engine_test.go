package claude_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/report"
	"github.com/purser-dev/purser/sqlite"
	"github.com/purser-dev/purser/validate"
)

// streamBackend replays Claude Code stream-json lines through the parser,
// reporting what it emits, as the backend does with the CLI's stdout.
type streamBackend struct{ lines []string }

func (b streamBackend) Call(_ context.Context, _ purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	p := claude.NewParser()
	for _, l := range b.lines {
		evs, err := p.Feed([]byte(l))
		if err != nil {
			return purser.CallResult{}, err
		}
		for _, ev := range evs {
			report(ev)
		}
	}
	return purser.CallResult{Text: "done"}, nil
}

// From the stream to BUDGET.md: a sub-agent's usage, named by the Task
// tool_use that started it, lands in the ledger under its name (the engine
// prices it and keeps the field) and BUDGET.md breaks the spend down by it.
func TestSubAgentSpendReachesBudgetMD(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "purser.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cb, err := contextbuild.New()
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{
		`{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_7","name":"Task","input":{"description":"Run the tests","subagent_type":"test-runner"}}],"usage":{"input_tokens":1000,"output_tokens":50}},"parent_tool_use_id":null}`,
		`{"type":"assistant","message":{"id":"m2","model":"claude-haiku-4-5","content":[],"usage":{"input_tokens":400,"output_tokens":30}},"parent_tool_use_id":"toolu_7"}`,
		`{"type":"assistant","message":{"id":"m3","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":1200,"output_tokens":20}},"parent_tool_use_id":null}`,
	}
	eng, err := engine.New(engine.Config{
		Store:      store,
		Backends:   func(purser.BackendSpec) (purser.Backend, error) { return streamBackend{lines}, nil },
		Validators: validate.Runner{},
		Context:    cb,
		Artifacts:  report.Artifacts{},
		Prices:     pricing.Builtin(),
	})
	if err != nil {
		t.Fatal(err)
	}
	iters, capUSD := 3, budget.Dollars(5)
	task := purser.Task{ID: "delegate", Goal: "Fix the tests.", Workspace: dir,
		Validators: []purser.Validator{{Name: "ok", Run: "true", Timeout: 30 * time.Second}},
		Backend:    purser.BackendSpec{Name: "stream", Type: "stream", Models: map[string]string{"standard": "claude-sonnet-4-5"}},
		ModelTier:  "standard",
		Budget:     budget.Config{Hard: budget.HardLimits{USD: &capUSD, MaxIterations: &iters}},
		Degrade:    purser.DefaultDegradePolicy(),
	}
	if err := eng.RunTask(ctx, task, nil, "run-1"); err != nil {
		t.Fatal(err)
	}
	ledger, err := store.Usage(ctx, "delegate")
	if err != nil {
		t.Fatal(err)
	}
	agents := map[string]int64{}
	for _, e := range ledger {
		if e.Event.Tokens() > 0 {
			agents[e.Event.Agent] += e.Event.Tokens()
		}
	}
	if agents[""] != 2270 || agents["test-runner: Run the tests"] != 430 || len(agents) != 2 {
		t.Errorf("tokens per agent in the ledger = %v, want the main agent 2270 and test-runner 430", agents)
	}
	md, err := store.Artifact(ctx, "delegate", "BUDGET.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Per sub-agent", "| (main agent) | 1 | 2270 |", "| test-runner: Run the tests | 1 | 430 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("BUDGET.md lacks %q:\n%s", want, md)
		}
	}
}
