package engine

import (
	"context"
	"fmt"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// The degrade policy at the wire, for any agent: in WARNING, a request's
// model moves to the backend's cheap tier (switch_tier_cheap) when the
// bill says so, cache included; its output bound is not clamped
// (shrink_context says why). Measured on backendtest.CacheMock
// (degradebill_test.go, docs/benchmarks.md).
//
// Cache traffic is most of an agent's bill: a request whose prefix the
// provider has cached pays the cache-read price for it (a tenth of input
// on Anthropic and OpenAI). Moving to another model loses that cache: the
// same prefix is billed as a cache write at the new model's price on the
// first request there, and read from the new model's cache after. So the
// switch is a one-time loss (move: the request on the cheap model writing
// the prefix, less warm: the same request reading it there) against a
// saving on every request after (stay, the request reading the old
// model's cache, less warm). The door cannot know how many requests are
// to come, so it decides as in ski rental: it stays while what staying
// has cost more than warm, summed over the requests it declined the
// switch on (rent), is less than the one-time loss, and moves at the
// first request where it is not — at once when there is no cache to lose
// (move below stay). A conversation that ends at once after the move pays
// at most twice what the better of never and at-once would have; a long
// one moves, where judging each request alone never would (a warm cache
// always makes one request dearer on the new model). Once taken, the
// call's requests stay on the cheap model, whose cache then builds up.
//
// A clamp of the output bound saves nothing the agent still wants: a reply
// it cuts at max_tokens is continued (or retried) by another request that
// reads the whole prompt again and produces the rest, so the clamp can only
// raise the bill (and the tokens a token cap counts). It is recorded as
// not taken, with why; what a budget has left under its hard cap still
// clamps a request at admission (wire.go).

// degrade applies the task's degrade policy to one request and says each
// action considered, taken or not, with why.
func (w *wireAdmitter) degrade(ctx context.Context, r purser.WireRequest, maxOut int64) (string, int64, []string) {
	d := decideDegrade(w.t.task.Degrade, w.t.budget)
	model := r.Model
	var actions []string
	say := func(a purser.DegradeAction, taken bool, detail string) {
		actions = append(actions, fmt.Sprintf("%s: %s", a, detail))
		w.note(ctx, d, a, taken, detail)
	}
	if d.on(purser.SwitchTierCheap) {
		model = w.switchTier(ctx, r, maxOut, say)
	}
	if reserve := w.t.e.cfg.ReserveOutputTokens; d.on(purser.ShrinkContext) && maxOut > reserve {
		say(purser.ShrinkContext, false, fmt.Sprintf("not taken: max output %d → %d would cut a reply the agent continues, reading its whole prompt again: it saves no output and raises the bill", maxOut, reserve))
	}
	return model, maxOut, actions
}

// switchTier judges switch_tier_cheap for one request (see above) and
// returns the model to forward it to.
func (w *wireAdmitter) switchTier(ctx context.Context, r purser.WireRequest, maxOut int64, say func(purser.DegradeAction, bool, string)) string {
	t := w.t
	cheap, ok := t.task.Backend.Model(purser.CheapTier)
	if ok && cheap != r.Model {
		w.seed(ctx, r.Model, cheap)
	}
	w.mu.Lock()
	switched := w.switched
	cached, lastOut, rent := w.cache[r.Model], w.output[r.Model], w.rent[r.Model]
	w.mu.Unlock()
	switch {
	case switched != "" && switched != r.Model:
		say(purser.SwitchTierCheap, true, fmt.Sprintf("model %s → %s: the call's requests moved to the cheap tier (its cache is there now)", r.Model, switched))
		return switched
	case switched != "" || cheap == r.Model:
		return r.Model
	case !ok:
		say(purser.SwitchTierCheap, false, "not taken: the backend names no cheap tier")
		return r.Model
	}
	out := maxOut
	if lastOut > 0 {
		out = min(lastOut, maxOut)
	}
	cached = min(cached, r.InputTokens)
	est := func(model string, read, write int64) budget.UsageEvent {
		return t.e.cfg.Prices.Estimate(budget.UsageEvent{Model: model, InputTokens: r.InputTokens, CacheReadTokens: read, CacheWriteTokens: write, OutputTokens: out})
	}
	stay, move, warm := est(r.Model, cached, 0), est(cheap, 0, cached), est(cheap, cached, 0)
	if stay.CostSource != budget.CostEstimated || move.CostSource != budget.CostEstimated {
		say(purser.SwitchTierCheap, false, fmt.Sprintf("not taken: model %s → %s cannot be judged on its bill (a price is unknown)", r.Model, cheap))
		return r.Model
	}
	cache := "no prompt cache to lose"
	if cached > 0 {
		cache = fmt.Sprintf("loses %d cached tokens", cached)
	}
	if move.USD < stay.USD.Plus(rent) {
		w.mu.Lock()
		w.switched = cheap
		w.mu.Unlock()
		paid := ""
		if rent > 0 {
			paid = fmt.Sprintf(" plus %s staying has cost over %s since the switch was declined", rent, cheap)
		}
		say(purser.SwitchTierCheap, true, fmt.Sprintf("model %s → %s: %s; est. %s on %s vs %s staying%s", r.Model, cheap, cache, move.USD, cheap, stay.USD, paid))
		return cheap
	}
	w.mu.Lock()
	if w.rent == nil {
		w.rent = map[string]budget.USD{}
	}
	if stay.USD > warm.USD {
		w.rent[r.Model] = w.rent[r.Model].Plus(stay.USD - warm.USD)
	}
	w.mu.Unlock()
	say(purser.SwitchTierCheap, false, fmt.Sprintf("not taken: model %s → %s %s; est. %s on %s vs %s staying (plus %s paid so far over %s warm)", r.Model, cheap, cache, move.USD, cheap, stay.USD, rent, cheap))
	return r.Model
}

// seed gives the call's first judgement of a switch off model what the
// task's earlier calls know (switchHistory, degrade.go): the prefix model
// has cached — the agent's system prompt, which this call's first request
// reads too — and the rent of the calls that declined the switch. Without
// it a call's first request would see no cache to lose.
func (w *wireAdmitter) seed(ctx context.Context, model, cheap string) {
	w.mu.Lock()
	_, seeded := w.rent[model]
	w.mu.Unlock()
	if seeded {
		return
	}
	first, rent, err := w.t.switchHistory(ctx, model, cheap)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rent == nil {
		w.rent = map[string]budget.USD{}
	}
	if _, seeded := w.rent[model]; seeded {
		return
	}
	w.rent[model] = rent
	if _, known := w.cache[model]; err == nil && !known && first.CacheReadTokens > 0 {
		w.cache[model] = first.CacheReadTokens
		w.output[model] = first.OutputTokens
	}
}

// note records a degrade action at the wire as the call's other degrade
// actions are (the store, the log, the live view): each kind of decision
// once per call, since an agent sends many requests.
func (w *wireAdmitter) note(ctx context.Context, d degradeState, a purser.DegradeAction, taken bool, detail string) {
	key := fmt.Sprintf("%s/%t", a, taken)
	w.mu.Lock()
	if w.noted == nil {
		w.noted = map[string]bool{}
	}
	seen := w.noted[key]
	w.noted[key] = true
	w.mu.Unlock()
	if seen {
		return
	}
	w.noteMu.Lock()
	defer w.noteMu.Unlock()
	w.t.noteDegrade(ctx, d, w.pc.kind, a, "at the wire: "+detail)
}
