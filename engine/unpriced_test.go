package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/sim"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/engine"
)

// fencedSim is the sim backend declaring a spending fence of its own, as
// Claude Code's --max-budget-usd is.
type fencedSim struct{ *sim.Backend }

func (fencedSim) FencesUSD(string) bool { return true }

// Issue 11 item 6: a call on a model Purser has no price for is warned about
// before anything is spent, and refused where only a money cap would bound
// it, unless the backend fences its money or the user accepts tokens and
// time as the bound.
func TestUnknownModelIsWarnedAndRefusedUnderAMoneyCapOnly(t *testing.T) {
	t.Parallel()
	// Usage without costUsd: the sim reports tokens only, as Codex does, so
	// its dollars are whatever Purser's catalogue says.
	const tokensOnly = "steps:\n  - usage: {inputTokens: 1000, outputTokens: 100}\n    files: {src/fixed: \"yes\"}\n"
	const costReported = "steps:\n  - usage: {inputTokens: 1000, outputTokens: 100, costUsd: 0.02}\n    files: {src/fixed: \"yes\"}\n"
	moneyOnly := budget.Config{Hard: budget.HardLimits{USD: usd("0.01"), MaxIterations: ptr(3)}}
	for _, tc := range []struct {
		name        string
		script      string
		model       string
		budget      budget.Config
		run         *budget.Config
		fence       bool
		allow       bool
		billing     purser.Billing
		wantWarning string // a part of the warning; "" for none
		wantRefused bool
	}{
		{name: "money cap only, no fence: refused before the call", script: tokensOnly, model: "sim-large", budget: moneyOnly,
			wantWarning: "only a money cap bounds the call", wantRefused: true},
		{name: "the backend's default model is unpriced too", script: tokensOnly, model: "", budget: moneyOnly,
			wantWarning: "the backend's default model", wantRefused: true},
		{name: "a token cap bounds the call: warned, runs", script: tokensOnly, model: "sim-large",
			budget:      budget.Config{Hard: budget.HardLimits{USD: usd("0.01"), Tokens: ptr[int64](50_000), MaxIterations: ptr(3)}},
			wantWarning: "the task's token cap bounds it"},
		{name: "the run's time cap bounds the call: warned, runs", script: tokensOnly, model: "sim-large", budget: moneyOnly,
			run:         &budget.Config{Hard: budget.HardLimits{TimeMinutes: ptr(budget.Minutes(time.Hour)), MaxIterations: ptr(10)}},
			wantWarning: "the run's time cap bounds it"},
		{name: "the backend fences its money: warned, runs", script: tokensOnly, model: "sim-large", budget: moneyOnly, fence: true,
			wantWarning: "its own fence"},
		{name: "the sim reports every dollar as it streams: a fence, runs", script: costReported, model: "sim-large",
			budget: budget.Config{Hard: budget.HardLimits{USD: usd("1"), MaxIterations: ptr(3)}}, wantWarning: "its own fence"},
		{name: "unpricedModel: allow accepts the risk: warned, runs", script: tokensOnly, model: "sim-large", budget: moneyOnly, allow: true,
			wantWarning: "unpricedModel: allow"},
		{name: "money not capped: warned, runs", script: tokensOnly, model: "sim-large",
			budget: budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(3)}}, wantWarning: "money is not capped"},
		{name: "a priced model: no warning", script: tokensOnly, model: "claude-haiku-4-5",
			budget: budget.Config{Hard: budget.HardLimits{USD: usd("1"), MaxIterations: ptr(3)}}},
		{name: "subscription billing never checks dollars against a cap: no warning", script: tokensOnly, model: "sim-large",
			budget:  budget.Config{Hard: budget.HardLimits{USD: usd("0.01"), Tokens: ptr[int64](50_000), MaxIterations: ptr(3)}},
			billing: purser.BillingSubscription},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tc.script)
			f.task.Backend.Models = map[string]string{"standard": tc.model}
			f.task.Backend.AllowUnpriced = tc.allow
			f.task.Backend.Billing = tc.billing
			f.task.Budget = tc.budget
			if tc.fence {
				f.cfg.Backends = func(spec purser.BackendSpec) (purser.Backend, error) {
					b, err := sim.New(spec)
					return fencedSim{b}, err
				}
			}
			var run *budget.Manager
			if tc.run != nil {
				var err error
				run, err = budget.NewManager(*tc.run, budget.Options{Scope: budget.ScopeRun})
				must(t, err)
			}
			err := f.engine().RunTask(context.Background(), f.task, run, "run-1")

			var warnings []string
			for _, ev := range f.events {
				if ev.Type == purser.EventWarning {
					warnings = append(warnings, ev.Message)
				}
			}
			switch {
			case tc.wantWarning == "" && len(warnings) > 0:
				t.Fatalf("warned %q, want no warning", warnings)
			case tc.wantWarning != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.wantWarning)):
				t.Fatalf("warnings %q: want exactly one saying %q", warnings, tc.wantWarning)
			}

			if !tc.wantRefused {
				must(t, err)
				if n := len(f.calls()); n == 0 {
					t.Fatal("no call was made")
				}
				return
			}
			var ue *engine.UnpricedModelError
			if !errors.As(err, &ue) || !errors.Is(err, engine.ErrUnpricedModel) || engine.IsBudgetStop(err) {
				t.Fatalf("err = %v, want an *UnpricedModelError, not a budget stop", err)
			}
			msg := err.Error()
			for _, want := range []string{"backend sim", "unpricedModel: allow", "prices:", "tokens or timeMinutes"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the error does not say %q: %s", want, msg)
				}
			}
			if tc.model != "" && !strings.Contains(msg, `"`+tc.model+`"`) {
				t.Errorf("the error does not name the model %q: %s", tc.model, msg)
			}
			if n := len(f.calls()); n != 0 {
				t.Fatalf("%d call(s) reached the backend, want none", n)
			}
			if st := f.state(); st.State != purser.StateFailed {
				t.Fatalf("state %s, want FAILED", st.State)
			}
			calls, err := f.store.Calls(context.Background(), f.task.ID)
			must(t, err)
			if len(calls) != 1 || calls[0].Outcome != purser.CallRefused {
				t.Fatalf("calls recorded: %+v, want one refused", calls)
			}
			if st := budgetOf(t, f); st.UsedTokens != 0 || st.UsedUSD != 0 {
				t.Fatalf("spent %d tokens, %s: want nothing", st.UsedTokens, st.UsedUSD)
			}
		})
	}
}
