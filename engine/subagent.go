package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// Sub-agents as budget nodes (subAgents:).
//
// The door tells the engine who sent each request (WireRequest.SubAgent:
// 0 the main agent, k the call's k-th spawn). A sub-agent's first request
// is its spawn: the task counts spawns over all its calls, and the first
// request of one past MaxSpawn is refused, as every later request of that
// sub-agent is. A sub-agent's request is held, beside the task's own holds,
// on the sub-agent's cap (Each): its output clamped to what the cap leaves
// after what the sub-agent spent and holds, refused when even the least
// worthwhile request does not fit. Either refusal is an error the door
// hands the agent as it is ("purser: sub-agent …"): the call goes on, the
// parent reads it as its tool's error. The task's caps still bind every
// request, a sub-agent's included (its spend is the task's).

// subAgentBook is what a task knows of its sub-agents.
type subAgentBook struct {
	mu      sync.Mutex
	spawned int // sub-agents admitted a first request, over the task's calls
	agents  map[subAgentKey]*subAgentState
}

// seedSpawns counts the sub-agents the task's ledger shows spent, before
// this process admits any: a task resumed in a new process counts its
// spawns over its whole life, as maxSpawn says, not afresh. A spawn that
// spent nothing (refused at its first request) is not counted, as it was
// not here. A ledger that cannot be read counts none: the call goes on
// under the task's own caps, which still bind everything.
func (t *taskRun) seedSpawns(ctx context.Context) {
	if t.task.SubAgents.MaxSpawn == nil {
		return
	}
	usage, err := t.e.cfg.Store.CallUsage(ctx, t.task.ID)
	if err != nil {
		t.log.Warn("reading the task's sub-agents from its ledger: maxSpawn counts this process's spawns only", "error", err)
		return
	}
	seen := map[string]bool{}
	for _, u := range usage {
		if u.Agent != "" && (u.Totals.Tokens > 0 || u.Totals.USD > 0) {
			seen[u.Agent] = true
		}
	}
	t.subs.mu.Lock()
	t.subs.spawned = len(seen)
	t.subs.mu.Unlock()
}

// subAgentKey names one sub-agent: its call's door and the door's index.
type subAgentKey struct {
	door *wireAdmitter
	k    int
}

// subAgentState is one sub-agent's spend, and its refusal once refused.
type subAgentState struct {
	n       int // its ordinal among the task's spawns
	name    string
	spent   budget.Amount
	held    budget.Amount // worst cases of its requests in flight
	refused error
	// lastRefusal is the refusal last told to the live view: each is told
	// once, not at every request the agent retries.
	lastRefusal string
}

// subAgentGrant is a sub-agent's request as its cap admits it.
type subAgentGrant struct {
	maxOut  int64
	action  string                  // the clamp, said; "" for none
	release func()                  // gives the request's hold on the cap back
	used    func(budget.UsageEvent) // books the reply's usage to the sub-agent
}

// subAgent admits a request on its sub-agent's caps: nothing to do for
// the main agent's, or a task that caps no sub-agent.
func (w *wireAdmitter) subAgent(r purser.WireRequest, model string, maxOut int64) (subAgentGrant, error) {
	g := subAgentGrant{maxOut: maxOut, release: func() {}}
	lim := w.t.task.SubAgents
	if r.SubAgent <= 0 || lim.IsZero() {
		return g, nil
	}
	b := &w.t.subs
	var refused *subAgentState // told once, to the live view, after b.mu
	defer func() {
		if refused != nil {
			w.t.e.emit(w.t, purser.Event{Type: purser.EventWarning, Call: w.pc.kind, Message: "refused at the door, the agent goes on: " + refused.refused.Error()})
		}
	}()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.agents == nil {
		b.agents = map[subAgentKey]*subAgentState{}
	}
	key := subAgentKey{door: w, k: r.SubAgent}
	st := b.agents[key]
	if st == nil {
		st = &subAgentState{name: r.SubAgentName}
		b.agents[key] = st
		if lim.MaxSpawn != nil && b.spawned >= *lim.MaxSpawn {
			st.refused = fmt.Errorf("%slimit: %d of maxSpawn %d already spawned", purser.SubAgentRefusalPrefix, b.spawned, *lim.MaxSpawn)
		} else {
			b.spawned++
			st.n = b.spawned
		}
	}
	if st.refused != nil {
		if st.lastRefusal == "" {
			st.lastRefusal, refused = st.refused.Error(), st
		}
		return g, st.refused
	}
	out, err := w.subAgentRoom(st, lim.Each, model, r.InputTokens, maxOut)
	if err != nil {
		if st.lastRefusal != err.Error() {
			st.lastRefusal, refused = err.Error(), &subAgentState{refused: err}
		}
		return g, err
	}
	if out < maxOut {
		g.maxOut = out
		g.action = fmt.Sprintf("max output %d → %d: what sub-agent %d's cap leaves", maxOut, out, st.n)
	}
	worst, _ := w.t.worstCase(model, r.InputTokens, g.maxOut)
	st.held = plusSat(st.held, worst)
	var settle sync.Once
	g.release = func() {
		settle.Do(func() {
			b.mu.Lock()
			st.held = minusFloor(st.held, worst)
			b.mu.Unlock()
		})
	}
	g.used = func(ev budget.UsageEvent) {
		if ev.Model == "" {
			ev.Model = model
		}
		ev = w.t.asBilled(w.t.e.cfg.Prices.Estimate(ev))
		spent := budget.Amount{Tokens: ev.Tokens()}
		if ev.CostSource == budget.CostEstimated || ev.CostSource == budget.CostReported {
			spent.USD = ev.USD
		}
		b.mu.Lock()
		st.spent = plusSat(st.spent, spent)
		b.mu.Unlock()
		g.release() // its worst case is now its spend
	}
	return g, nil
}

// subAgentRoom is the most output a sub-agent's request may ask for under
// its cap (b.mu held): maxOut, or less; a refusal when not even
// budget.MinOutputTokens fits.
func (w *wireAdmitter) subAgentRoom(st *subAgentState, each purser.SubAgentCap, model string, input, maxOut int64) (int64, error) {
	committed := plusSat(st.spent, st.held)
	fits := func(out int64) bool {
		worst, _ := w.t.worstCase(model, input, out)
		total := plusSat(committed, worst)
		return (each.USD == nil || total.USD <= *each.USD) && (each.Tokens == nil || total.Tokens <= *each.Tokens)
	}
	if fits(maxOut) {
		return maxOut, nil
	}
	least := min(budget.MinOutputTokens, maxOut)
	if !fits(least) {
		need, _ := w.t.worstCase(model, input, least)
		return 0, subAgentAtCap(st.n, each, committed, need)
	}
	lo, hi := least, maxOut // fits(lo), !fits(hi)
	for hi-lo > 1 {
		if mid := lo + (hi-lo)/2; fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// subAgentAtCap is the refusal of sub-agent n at its cap: the metric the
// request does not fit under, what the sub-agent spent (and holds) of it,
// and what its least request needs when that is what does not fit.
func subAgentAtCap(n int, each purser.SubAgentCap, committed, need budget.Amount) error {
	if each.USD != nil && plusSat(committed, need).USD > *each.USD {
		if committed.USD >= *each.USD {
			return fmt.Errorf("%s%d at its cap (%s of %s)", purser.SubAgentRefusalPrefix, n, committed.USD, *each.USD)
		}
		return fmt.Errorf("%s%d at its cap (%s of %s; its next request needs up to %s)", purser.SubAgentRefusalPrefix, n, committed.USD, *each.USD, need.USD)
	}
	if committed.Tokens >= *each.Tokens {
		return fmt.Errorf("%s%d at its cap (%d of %d tokens)", purser.SubAgentRefusalPrefix, n, committed.Tokens, *each.Tokens)
	}
	return fmt.Errorf("%s%d at its cap (%d of %d tokens; its next request needs up to %d)", purser.SubAgentRefusalPrefix, n, committed.Tokens, *each.Tokens, need.Tokens)
}
