package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/replay"
)

// history is the project's runs as the spend forecast reads them, kept
// between reads. It is read from the stored totals, never from the ledger:
// per task one row of totals and its calls' totals (for the model of its
// first call). A task's entry is read again only when its record changed
// (state or last update), so a read after the first costs one query of the
// task list; Version moves only when a finished run is added or changed,
// and the forecasts fitted on the history are kept until it does. It is
// safe for concurrent use.
type history struct {
	store Store
	// minAge is how long a read is trusted before the task list is read
	// again (0: every read reads it).
	minAge time.Duration

	mu      sync.Mutex
	entries map[string]historyEntry
	order   []string // task IDs as the store lists them (by creation)
	version uint64
	at      time.Time
	read    bool
	err     error
}

// historyEntry is one task as the history last read it.
type historyEntry struct {
	state   purser.TaskState
	updated time.Time
	run     replay.Run
}

// finished reports whether a task's final spend is known: it ended DONE,
// BLOCKED or FAILED (a resume may change it; its record's update says so).
func finished(s purser.TaskState) bool {
	return s == purser.StateDone || s == purser.StateBlocked || s == purser.StateFailed
}

func newHistory(s Store, minAge time.Duration) *history {
	return &history{store: s, minAge: minAge, entries: map[string]historyEntry{}}
}

// runs returns the history's runs, in the order the tasks were created, and
// its version.
func (h *history) runs(ctx context.Context) ([]replay.Run, uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.read || h.minAge == 0 || time.Since(h.at) >= h.minAge {
		h.err = h.refreshLocked(ctx)
		h.read, h.at = true, time.Now()
	}
	if h.err != nil {
		return nil, h.version, h.err
	}
	out := make([]replay.Run, 0, len(h.order))
	for _, id := range h.order {
		out = append(out, h.entries[id].run)
	}
	return out, h.version, nil
}

// model is the model of the first call of the task id as last read ("" when
// unknown).
func (h *history) model(id string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.entries[id].run.Model
}

// refreshLocked reads the task list and the totals of each task that is new
// or changed since the last read. Called with h.mu held.
func (h *history) refreshLocked(ctx context.Context) error {
	recs, err := h.store.Tasks(ctx)
	if err != nil {
		return fmt.Errorf("the forecast's history: %w", err)
	}
	order := make([]string, 0, len(recs))
	seen := make(map[string]bool, len(recs))
	changed := false
	for _, rec := range recs {
		order, seen[rec.ID] = append(order, rec.ID), true
		old, ok := h.entries[rec.ID]
		// A running task's first model is read until it is known; its
		// spend is not part of the history until it finishes.
		if ok && old.state == rec.State && old.updated.Equal(rec.UpdatedAt) && (old.run.Model != "" || finished(rec.State)) {
			continue
		}
		run, err := runFromTotals(ctx, h.store, rec)
		if err != nil {
			return err
		}
		h.entries[rec.ID] = historyEntry{state: rec.State, updated: rec.UpdatedAt, run: run}
		changed = changed || finished(rec.State) || (ok && finished(old.state))
	}
	for id, e := range h.entries {
		if !seen[id] {
			delete(h.entries, id)
			changed = changed || finished(e.state)
		}
	}
	h.order = order
	if changed {
		h.version++
	}
	return nil
}

// runFromTotals is one task as a run of the history: its final spend from
// its stored totals, the model of its first call, and whether it was
// solved (DONE) — unlabelled while it could still finish. Its tokens are
// kept whatever is known of its money (the tokens forecast reads them);
// its spend is left unknown (TotalCostUSD nil) when any of its calls was
// unpriced: the known part is a lower bound, and a final spend read low
// would pull every money interval down with it (moneyKnown).
func runFromTotals(ctx context.Context, s Store, rec purser.TaskRecord) (replay.Run, error) {
	run := replay.Run{InstanceID: rec.ID, System: "purser", WallTime: rec.Elapsed}
	calls, err := s.CallUsage(ctx, rec.ID)
	if err != nil {
		return run, fmt.Errorf("the forecast's history: %w", err)
	}
	if len(calls) > 0 {
		run.Model = calls[0].Model
	}
	if !finished(rec.State) {
		return run, nil
	}
	solved := rec.State == purser.StateDone
	run.Resolved = &solved
	totals, err := s.UsageTotals(ctx, rec.ID)
	if err != nil {
		return run, fmt.Errorf("the forecast's history: %w", err)
	}
	// Every token as input: the forecast reads their sum (as the budget
	// counts them), never prices them — a run's money is its recorded USD
	// or unknown.
	run.TotalInputTokens = totals.Tokens
	if src := totals.USDSource(); len(calls) > 0 && src != budget.SourceUnknown && src != budget.SourcePartial {
		usd := totals.USD
		run.TotalCostUSD = &usd
	}
	return run, nil
}

// moneyKnown reports whether a history run's final spend is known in full
// (runFromTotals): only those are read by the money forecast; every
// finished run is read by the tokens one.
func moneyKnown(r replay.Run) bool { return r.TotalCostUSD != nil }
