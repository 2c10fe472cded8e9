package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// switchLedger is what judging switch_tier_cheap needs of the task's
// ledger (switchHistory): read from the store once, at the first
// judgement, and kept from then on as the task's events are reported, so
// that each later judgement — one per call in WARNING, and one per model
// at the door — costs no read of the whole ledger (issue 24). It is an
// estimate's input, not an account: an event reported while it is first
// read may be missed (the task's queued events are committed first).
type switchLedger struct {
	mu       sync.Mutex
	loaded   bool
	cheap    string
	models   map[string]*modelLedger
	declined map[string]bool // iteration and kind of the calls that declined the switch at their start
	context  map[string]int  // each call's ContextTokens
}

// modelLedger is one model's part of the task's ledger, as switchHistory
// reads it.
type modelLedger struct {
	calls     map[string]bool // the calls with an entry of this model that sent input
	lastCall  string          // the call whose first such entry came last
	first     budget.UsageEvent
	cached    bool  // an entry read or wrote the cache
	lastOut   int64 // the output of the last entry that had any
	potential map[string]budget.USD
	rent      budget.USD // potential summed over the declined calls
}

// callKey names a call's iteration and kind, as its degrade records do.
func callKey(iteration int, kind purser.CallKind) string { return fmt.Sprint(iteration, kind) }

// load reads the task's ledger, calls and declines (sl.mu held).
func (sl *switchLedger) load(ctx context.Context, t *taskRun, cheap string) error {
	t.e.runs.pending.flush(t.task.ID) // the events reported so far are in the ledger
	entries, err := t.e.cfg.Store.Usage(ctx, t.task.ID)
	if err != nil {
		return err
	}
	calls, err := t.e.cfg.Store.Calls(ctx, t.task.ID)
	if err != nil {
		return err
	}
	sl.cheap, sl.models, sl.declined, sl.context = cheap, map[string]*modelLedger{}, t.declinedSwitches(ctx), map[string]int{}
	for _, c := range calls {
		sl.context[c.ID] = c.ContextTokens
	}
	for _, e := range entries {
		sl.observeLocked(t, e)
	}
	sl.loaded = true
	return nil
}

// observe adds an entry the task just reported, once loaded.
func (sl *switchLedger) observe(t *taskRun, e purser.LedgerEntry, contextTokens int) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if !sl.loaded {
		return
	}
	if _, known := sl.context[e.CallID]; !known {
		sl.context[e.CallID] = contextTokens
	}
	sl.observeLocked(t, e)
}

func (sl *switchLedger) observeLocked(t *taskRun, e purser.LedgerEntry) {
	ev := e.Event
	m := sl.models[ev.Model]
	if m == nil {
		m = &modelLedger{calls: map[string]bool{}, potential: map[string]budget.USD{}}
		sl.models[ev.Model] = m
	}
	if !m.calls[e.CallID] && ev.InputTokens > 0 {
		m.calls[e.CallID], m.lastCall, m.first = true, e.CallID, ev
	}
	m.cached = m.cached || ev.CacheReadTokens+ev.CacheWriteTokens > 0
	if ev.OutputTokens > 0 {
		m.lastOut = ev.OutputTokens
	}
	price := func(model string) budget.USD {
		return t.e.cfg.Prices.Estimate(budget.UsageEvent{Model: model, InputTokens: ev.InputTokens, CacheReadTokens: ev.CacheReadTokens,
			CacheWriteTokens: ev.CacheWriteTokens, OutputTokens: ev.OutputTokens}).USD
	}
	if stay, warm := price(ev.Model), price(sl.cheap); stay > warm {
		key := callKey(e.Iteration, e.Kind)
		m.potential[key] = m.potential[key].Plus(stay - warm)
		if sl.declined[key] {
			m.rent = m.rent.Plus(stay - warm)
		}
	}
}

// decline records that a call declined the switch at its start: what its
// iteration and kind have cost staying counts as rent from now on.
func (sl *switchLedger) decline(iteration int, kind purser.CallKind) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if !sl.loaded {
		return // read with the degrade records when it is
	}
	key := callKey(iteration, kind)
	if sl.declined[key] {
		return
	}
	sl.declined[key] = true
	for _, m := range sl.models {
		m.rent = m.rent.Plus(m.potential[key])
	}
}
