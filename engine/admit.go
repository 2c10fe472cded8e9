package engine

import (
	"context"
	"errors"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// worstCase is what a call is reserved for: its input plus the most output
// it may produce, priced when the model has a price and the backend bills
// per token.
func (t *taskRun) worstCase(model string, input, output int64) (budget.Amount, int64) {
	ev := t.e.cfg.Prices.Estimate(budget.UsageEvent{Model: model, InputTokens: input, OutputTokens: output})
	a := budget.Amount{Tokens: input + output}
	// A flat-rate plan's dollars are list prices: nothing to hold against a
	// money cap.
	if ev.CostSource == budget.CostEstimated && !t.task.Backend.Subscription() {
		a.USD = ev.USD
	}
	return a, output
}

// sharedTTL bounds how long a hold on a shared run budget outlives a
// process that died holding it.
const sharedTTL = purser.DefaultCallTimeout + time.Minute

// reserveShared holds the call's worst case on a run budget shared through
// the database, shrinking the call to what fits there. It returns the
// function that releases the hold.
func (t *taskRun) reserveShared(ctx context.Context, model string, input int64, want *budget.Amount, maxOut *int64) (func(), error) {
	run := t.budget.Parent()
	if t.e.cfg.Shared == nil || run == nil || t.runID == "" {
		return func() {}, nil
	}
	cfg := run.Config()
	caps := budget.Unlimited
	if cfg.Hard.USD != nil {
		caps.USD = *cfg.Hard.USD
	}
	if cfg.Hard.Tokens != nil {
		caps.Tokens = *cfg.Hard.Tokens
	}
	if caps == budget.Unlimited {
		return func() {}, nil
	}
	ttl := t.task.Backend.CallTimeout + time.Minute
	if t.task.Backend.CallTimeout <= 0 {
		ttl = sharedTTL
	}
	release, err := t.e.cfg.Shared.ReserveRun(ctx, t.runID, caps, *want, ttl)
	var short *budget.InsufficientBudgetError
	if errors.As(err, &short) {
		local := t.budget.Available()
		avail := budget.Amount{USD: min(short.Available.USD, local.USD), Tokens: min(short.Available.Tokens, local.Tokens)}
		var w budget.Amount
		var out int64
		if w, out, err = t.clampToFit(model, input, avail); err == nil {
			*want, *maxOut = w, out
			release, err = t.e.cfg.Shared.ReserveRun(ctx, t.runID, caps, *want, ttl)
		}
		if err != nil {
			var short2 *budget.InsufficientBudgetError
			if errors.As(err, &short2) {
				short2.Scope = budget.ScopeRun
			}
		}
	}
	if err != nil {
		return func() {}, err
	}
	return release, nil
}

// minOutputTokens is the least output worth making a call for.
const minOutputTokens = 256

// clampToFit shrinks the call's output to what the budget has left, or says
// the call cannot be made at all.
func (t *taskRun) clampToFit(model string, input int64, avail budget.Amount) (budget.Amount, int64, error) {
	out := avail.Tokens - input
	if avail.Tokens == budget.Unlimited.Tokens {
		out = t.e.cfg.ReserveOutputTokens
	}
	for out >= minOutputTokens {
		want, _ := t.worstCase(model, input, out)
		if want.USD <= avail.USD && want.Tokens <= avail.Tokens {
			return want, out, nil
		}
		out = out * 3 / 4
	}
	least, _ := t.worstCase(model, input, minOutputTokens)
	metric := budget.Tokens
	if least.USD > avail.USD {
		metric = budget.Money
	}
	return budget.Amount{}, 0, &budget.InsufficientBudgetError{Metric: metric, Want: least, Available: avail}
}
