package engine

import (
	"context"
	"fmt"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// The degrade policy at the wire, for any agent: in WARNING, a request's
// model moves to the backend's cheap tier (switch_tier_cheap) and its
// output bound is clamped to the engine's per-call reserve
// (shrink_context: the reply shrinks as the context would) — each only
// when the estimate says it lowers the bill, cache included.
//
// Cache traffic is most of an agent's bill: a request whose prefix the
// provider has cached pays the cache-read price for it (a tenth of input
// on Anthropic and OpenAI). Moving to another model loses that cache: the
// same prefix is billed as fresh input, or as a cache write, at the new
// model's price, on the first request there. So a switch is judged on
// that request's estimated bill — the prefix the last reply of this model
// read or wrote from the cache billed as a cache read on the old model
// and as a cache write on the new one, the output as the last reply's (or
// the bound) at each model's price — and taken only when the new model's
// bill is lower. Once taken, the call's requests stay on the cheap model,
// whose cache then builds up. A clamp of the output bound never touches
// the cache, but a reply it cuts short is continued by another request
// that reads the whole prompt again: it is taken only when the output it
// can cut costs more than one such read at the cache-read price.

// degrade applies the task's degrade policy to one request and says each
// action considered, taken or not, with why.
func (w *wireAdmitter) degrade(ctx context.Context, r purser.WireRequest, maxOut int64) (string, int64, []string) {
	t := w.t
	d := decideDegrade(t.task.Degrade, t.budget)
	model := r.Model
	var actions []string
	say := func(a purser.DegradeAction, taken bool, detail string) {
		actions = append(actions, fmt.Sprintf("%s: %s", a, detail))
		w.note(ctx, d, a, taken, detail)
	}
	if d.on(purser.SwitchTierCheap) {
		w.mu.Lock()
		switched := w.switched
		cached, lastOut := w.cache[r.Model], w.output[r.Model]
		w.mu.Unlock()
		cheap, ok := t.task.Backend.Model(purser.CheapTier)
		switch {
		case switched != "" && switched != r.Model:
			model = switched
			say(purser.SwitchTierCheap, true, fmt.Sprintf("model %s → %s: the call's requests moved to the cheap tier (its cache is there now)", r.Model, switched))
		case switched != "":
		case !ok:
			say(purser.SwitchTierCheap, false, "not taken: the backend names no cheap tier")
		case cheap == r.Model:
		default:
			out := maxOut
			if lastOut > 0 {
				out = min(lastOut, maxOut)
			}
			cached = min(cached, r.InputTokens)
			stay := t.e.cfg.Prices.Estimate(budget.UsageEvent{Model: r.Model, InputTokens: r.InputTokens, CacheReadTokens: cached, OutputTokens: out})
			move := t.e.cfg.Prices.Estimate(budget.UsageEvent{Model: cheap, InputTokens: r.InputTokens, CacheWriteTokens: cached, OutputTokens: out})
			cache := "no prompt cache to lose"
			if cached > 0 {
				cache = fmt.Sprintf("loses %d cached tokens", cached)
			}
			switch {
			case stay.CostSource != budget.CostEstimated || move.CostSource != budget.CostEstimated:
				say(purser.SwitchTierCheap, false, fmt.Sprintf("not taken: model %s → %s cannot be judged on its bill (a price is unknown)", r.Model, cheap))
			case move.USD < stay.USD:
				model = cheap
				w.mu.Lock()
				w.switched = cheap
				w.mu.Unlock()
				say(purser.SwitchTierCheap, true, fmt.Sprintf("model %s → %s: %s; est. %s on %s vs %s staying", r.Model, cheap, cache, move.USD, cheap, stay.USD))
			default:
				say(purser.SwitchTierCheap, false, fmt.Sprintf("not taken: model %s → %s %s; est. %s on %s vs %s staying", r.Model, cheap, cache, move.USD, cheap, stay.USD))
			}
		}
	}
	if reserve := t.e.cfg.ReserveOutputTokens; d.on(purser.ShrinkContext) && maxOut > reserve {
		cut := t.e.cfg.Prices.Estimate(budget.UsageEvent{Model: model, OutputTokens: maxOut - reserve})
		// At best, the continuation reads the whole prompt from the cache.
		reread := t.e.cfg.Prices.Estimate(budget.UsageEvent{Model: model, InputTokens: r.InputTokens, CacheReadTokens: r.InputTokens})
		switch {
		case cut.CostSource != budget.CostEstimated || reread.CostSource != budget.CostEstimated:
			// Unpriced: tokens are what the budget counts, and a clamp
			// bounds them.
			say(purser.ShrinkContext, true, fmt.Sprintf("max output %d → %d: the model is unpriced; the clamp bounds its tokens", maxOut, reserve))
			maxOut = reserve
		case cut.USD > reread.USD:
			say(purser.ShrinkContext, true, fmt.Sprintf("max output %d → %d: cuts up to %s of output, more than one continuation's cached re-read (%s)", maxOut, reserve, cut.USD, reread.USD))
			maxOut = reserve
		default:
			say(purser.ShrinkContext, false, fmt.Sprintf("not taken: max output %d → %d would cut up to %s of output, less than a continuation's cached re-read (%s)", maxOut, reserve, cut.USD, reread.USD))
		}
	}
	return model, maxOut, actions
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
