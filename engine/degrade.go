package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/prompt"
)

// degradeState is the set of degrade actions in force for one call, and why.
type degradeState struct {
	active map[purser.DegradeAction]bool
	tier   budget.Tier   // the tier that triggered them
	metric budget.Metric // the metric that put that budget in its tier
	scope  budget.Scope  // whose budget: the task's or the run's
	why    string        // a reason besides the tier (the forecast trigger's)
}

func (d degradeState) on(a purser.DegradeAction) bool { return d.active[a] }

// decideDegrade applies the policy to the budget status at this moment. An
// action staged "at: warning" waits for a metric to reach its warning line;
// the others apply on entering WARNING. Either scope (task or run) counts.
func decideDegrade(policy purser.DegradePolicy, m *budget.Manager) degradeState {
	d := degradeState{active: map[purser.DegradeAction]bool{}}
	for c := m; c != nil; c = c.Parent() {
		st := c.Status()
		if st.Tier < budget.Warning {
			continue
		}
		if d.tier < st.Tier || len(d.active) == 0 {
			d.tier, d.metric, d.scope = st.Tier, st.Cause, c.Scope()
		}
		for _, step := range policy.Steps {
			if step.At == purser.AtWarningLine && !st.PastWarningLine {
				continue
			}
			d.active[step.Action] = true
		}
	}
	return d
}

// The degrade of a prompt Purser builds (shrink_context, repair_only_mode)
// changes the prompt's text. A call's prompt begins with its iteration
// and kind, so no later call shares a prefix with it beyond the agent's own
// system prompt, which the change leaves alone: changing it breaks no
// cache, and a shrink lowers the bill (measured on backendtest.CacheMock,
// degradebill_test.go). A retry is different: it resends the prompt of the
// attempt it retries, which the provider has cached if that attempt
// reached it — and a budget that entered WARNING during that attempt would
// change the retry's prompt, billing it as a cache write (1.25× input on
// Anthropic) instead of a cache read (0.1×). A 40k-token prompt shrunk to
// 27k on a retry raised the mock's bill by a third. So on a retry whose
// attempt reached the provider, a change to the prompt is judged on the
// first request's bill, cache included: the prefix the changed prompt
// shares with the cached one read, the rest written, against the prompt
// as it was read whole. It is taken only when that is cheaper — and then
// every request after it is cheaper too (a smaller prompt read from the
// cache), so a change taken lowers the bill. Declining may forgo a saving
// that a long retry would have repaid.

// promptChange judges a retry's prompt now against sent, the attempt it
// retries, whose prompt the provider has cached if it reached it: keep
// reports whether the retry should resend sent's prompt, and detail says
// the estimate ("" when there is no cache to lose: now is sent as built).
func (t *taskRun) promptChange(sent *preparedCall, model, now string) (keep bool, detail string) {
	if sent == nil || !sent.reached.Load() || sent.model != model || sent.prompt == now {
		return false, ""
	}
	if _, off := unjudgedRetries.Load(t.task.Workspace); off {
		return false, ""
	}
	count := func(s string) int64 { return int64(t.e.cfg.Context.Counter.Count(s)) }
	bill := func(text string) budget.UsageEvent {
		in := count(text)
		cached := min(count(commonPrefix(sent.prompt, text)), in)
		return t.e.cfg.Prices.Estimate(budget.UsageEvent{Model: model, InputTokens: in, CacheReadTokens: cached, CacheWriteTokens: in - cached})
	}
	stay, change := bill(sent.prompt), bill(now)
	if stay.CostSource != budget.CostEstimated || change.CostSource != budget.CostEstimated {
		// Unpriced: tokens are what the budget counts.
		return change.InputTokens >= stay.InputTokens, fmt.Sprintf("on a retry, %d prompt tokens vs attempt %d's %d (the model is unpriced)", change.InputTokens, sent.rec.Attempt, stay.InputTokens)
	}
	detail = fmt.Sprintf("on a retry, est. %s for the changed prompt (%d tokens, %d cached) vs %s for attempt %d's, cached (%d tokens)",
		change.USD, change.InputTokens, change.CacheReadTokens, stay.USD, sent.rec.Attempt, stay.InputTokens)
	return change.USD >= stay.USD, detail
}

// degradePrompt builds a call's context and prompt under the degrade
// policy (shrink_context, repair_only_mode), each noted with why; a retry
// resends its attempt's prompt when changing it costs more (promptChange).
func (t *taskRun) degradePrompt(ctx context.Context, d degradeState, kind purser.CallKind, in contextbuild.Input, model string, sent *preparedCall) (contextbuild.Context, string, error) {
	cctx := t.e.cfg.Context.Full(in)
	var shrunk string
	if d.on(purser.ShrinkContext) {
		shrink := t.task.Degrade.Shrink
		var err error
		if cctx, err = t.e.cfg.Context.Shrink(in, shrink.Strategy, shrink.MaxTokens); err != nil {
			return cctx, "", err
		}
		shrunk = fmt.Sprintf("context %s to %d tokens (cap %d)", cctx.Strategy, cctx.Tokens, shrink.MaxTokens)
	}
	repairOnly := d.on(purser.RepairOnlyMode) && kind == purser.CallMain
	text := prompt.Build(prompt.Input{Kind: kind, Iteration: t.iteration, Context: cctx, RepairOnly: repairOnly, Validators: t.task.Validators})
	keep, detail := t.promptChange(sent, model, text)
	say := func(a purser.DegradeAction, what string) {
		switch {
		case keep:
			t.noteDegrade(ctx, d, kind, a, "not taken: "+what+": "+detail)
		case detail != "":
			t.noteDegrade(ctx, d, kind, a, what+"; "+detail)
		default:
			t.noteDegrade(ctx, d, kind, a, what)
		}
	}
	if shrunk != "" {
		say(purser.ShrinkContext, shrunk)
	}
	if repairOnly {
		say(purser.RepairOnlyMode, "repair-only prompt")
	}
	if keep {
		return sent.ctx, sent.prompt, nil
	}
	return cctx, text, nil
}

// unjudgedRetries holds the workspaces of tasks whose retries take a
// prompt change unjudged, as before promptChange: set by tests only
// (degrade_export_test.go), to measure what forcing the change bills.
var unjudgedRetries sync.Map

// commonPrefix is the longest prefix a and b share.
func commonPrefix(a, b string) string {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return a[:i]
		}
	}
	return a[:n]
}

// switch_tier_cheap at a call's start is judged as the door judges it per
// request (wiredegrade.go), across calls: a call's requests begin with the
// agent's own system prompt, which the provider has cached on the model
// the last call used, and which a move to the cheap tier writes again.
// Measured on the cache mock, moving one-request calls off a 60k-token
// cached system prompt raised the bill by 13 %. The task's ledger says
// what the last call's first request sent; what a new call shares with it
// is what that request read from the cache, or, when it read nothing (the
// task's first call), its input less the context Purser built for it
// (each call's prompt differs from its first line). The calls that
// declined the switch (their degrade records) say what staying has cost
// more than the cheap model's warm cache would have (the rent).

// switchHistory reads, from the task's ledger, the model's last call's
// first request (InputTokens, and CacheReadTokens as the prefix a new call
// shares with it, 0 when the model showed no cache), the output of the
// model's last reply, and the rent: over the model's usage in the calls
// that declined the switch, what it cost more than the same on cheap.
func (t *taskRun) switchHistory(ctx context.Context, model, cheap string) (first budget.UsageEvent, rent budget.USD, err error) {
	sl := &t.switches
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if !sl.loaded || sl.cheap != cheap {
		if err := sl.load(ctx, t, cheap); err != nil {
			return first, 0, err
		}
	}
	m := sl.models[model]
	if m == nil {
		return first, 0, nil
	}
	first.OutputTokens, first.InputTokens, rent = m.lastOut, m.first.InputTokens, m.rent
	if !m.cached {
		return first, rent, nil
	}
	first.CacheReadTokens = m.first.CacheReadTokens
	if ctxTokens, known := sl.context[m.lastCall]; first.CacheReadTokens == 0 && known {
		first.CacheReadTokens = max(m.first.InputTokens-int64(ctxTokens), 0)
	}
	return first, rent, nil
}

// declinedSwitches is the calls (iteration and kind) that declined
// switch_tier_cheap at their start.
func (t *taskRun) declinedSwitches(ctx context.Context) map[string]bool {
	out := map[string]bool{}
	degrades, err := t.e.cfg.Store.Degrades(ctx, t.task.ID)
	if err != nil {
		return out
	}
	for _, d := range degrades {
		if d.Action == purser.SwitchTierCheap && strings.HasPrefix(d.Detail, "not taken: model tier") {
			out[fmt.Sprint(d.Iteration, d.Call)] = true
		}
	}
	return out
}

// judgeSwitch judges switch_tier_cheap at a call's start from model to
// cheap: the new call's first request as the last call's, its shared
// prefix read staying and written moving, the rest written either way;
// detail says the estimate ("" when the ledger knows no cache to lose).
func (t *taskRun) judgeSwitch(ctx context.Context, model, cheap string) (take bool, detail string) {
	first, rent, err := t.switchHistory(ctx, model, cheap)
	shared := first.CacheReadTokens
	if err != nil || shared == 0 {
		return true, ""
	}
	est := func(m string, read int64) budget.UsageEvent {
		return t.e.cfg.Prices.Estimate(budget.UsageEvent{Model: m, InputTokens: first.InputTokens, CacheReadTokens: read,
			CacheWriteTokens: first.InputTokens - read, OutputTokens: first.OutputTokens})
	}
	stay, move := est(model, shared), est(cheap, 0)
	if stay.CostSource != budget.CostEstimated || move.CostSource != budget.CostEstimated {
		return true, ""
	}
	detail = fmt.Sprintf("loses %d cached tokens; est. %s for a first request on %s vs %s staying, plus %s staying has cost over %s since the switch was declined",
		shared, move.USD, cheap, stay.USD, rent, cheap)
	return move.USD < stay.USD.Plus(rent), detail
}
