package engine

import (
	"context"
	"fmt"
	"sort"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/redact"
)

// A call whose stream Purser stopped reading before the CLI had reported
// everything — Purser was killed mid-call, or the hard cap cut the call —
// may have spent more than the ledger holds: the provider delivered a reply
// the CLI wrote to its session file, but Purser never saw its usage. The
// backend's SpendRecoverer reads that file; the engine adds to the ledger
// only what the file holds beyond the ledger's figure for the call.

// recoverSpend asks the backend what call c spent beyond the ledger, adds
// that to the ledger (idempotently: the keys name the ledger's figure the
// delta was taken against, so a repeated recovery of the same state adds
// nothing) and to the task's budget, and notes on c what was recovered and
// from which file. calls are the task's calls, for the session files other
// calls claim. c is changed; saving it is the caller's. It never fails the
// task: a file that cannot be read is said in the note and the log.
func (t *taskRun) recoverSpend(ctx context.Context, c *purser.CallRecord, calls []purser.CallRecord, why string) {
	r, ok := t.backend.(purser.SpendRecoverer)
	if !ok {
		return
	}
	recorded, err := t.recordedByModel(ctx, c.ID)
	if err != nil {
		t.log.Warn("reading the ledger of a call to recover its spend", "call", c.ID, "error", err)
		return
	}
	claimed := map[string]bool{}
	for _, o := range calls {
		if o.ID != c.ID && o.Session != "" {
			claimed[o.Session] = true
		}
	}
	got, err := r.RecoverSpend(ctx, purser.SpendQuery{Call: *c, Workspace: t.task.Workspace, Recorded: recorded,
		Claimed: func(file string) bool { return claimed[file] }})
	if err != nil {
		t.log.Warn("recovering a call's spend from its session file", "call", c.ID, "error", err)
		c.Note = purser.JoinNotes(c.Note, redact.String(fmt.Sprintf("%s: its session file could not be read: %v", why, err)))
		return
	}
	if got.Session != "" && c.Session == "" {
		c.Session = got.Session
	}
	var entries []purser.LedgerEntry
	var added budget.Totals
	for _, ev := range got.Usage {
		if ev.Tokens() <= 0 {
			continue
		}
		if ev.Model == "" {
			ev.Model = c.Model
		}
		ev = t.e.cfg.Prices.Estimate(ev)
		before := int64(0)
		for _, r := range recorded {
			if r.Model == ev.Model {
				before = r.Tokens()
			}
		}
		entries = append(entries, purser.LedgerEntry{Key: fmt.Sprintf("%s/recovered/%s/%d", c.ID, ev.Model, before),
			TaskID: t.task.ID, RunID: t.runID, CallID: c.ID, Iteration: c.Iteration, Kind: c.Kind, Event: ev, At: t.e.cfg.Clock.Now()})
		added.Add(ev)
	}
	note := got.Note
	if len(entries) > 0 {
		if err := t.e.cfg.Store.AppendUsage(ctx, entries...); err != nil {
			t.log.Warn("recording a call's recovered spend", "call", c.ID, "error", err)
			c.Note = purser.JoinNotes(c.Note, redact.String(fmt.Sprintf("%s: recovering its spend failed: %v", why, err)))
			return
		}
		for _, e := range entries {
			t.budget.RecordUsage(e.Event)
		}
		from := got.Session
		if from == "" {
			from = c.Wire // the CLI wrote nothing down; Purser's wire meter did
		}
		note = purser.JoinNotes(fmt.Sprintf("%s: %d tokens (%s) recovered from %s beyond the %s the ledger had", why, added.Tokens, added.USD,
			from, tokensText(recorded)), note)
		t.log.Warn("recovered a call's spend from its session file", "call", c.ID, "tokens", added.Tokens, "usd", added.USD, "file", from)
	} else if got.Session != "" {
		note = purser.JoinNotes(fmt.Sprintf("%s: %s holds nothing beyond the ledger", why, got.Session), note)
	} else {
		note = purser.JoinNotes(fmt.Sprintf("%s: no session file found", why), note)
	}
	c.Note = purser.JoinNotes(c.Note, redact.String(note))
}

// recordedByModel sums the ledger's events of a call per model, tokens only.
func (t *taskRun) recordedByModel(ctx context.Context, callID string) ([]budget.UsageEvent, error) {
	entries, err := t.e.cfg.Store.Usage(ctx, t.task.ID)
	if err != nil {
		return nil, err
	}
	byModel := map[string]*budget.UsageEvent{}
	var models []string
	for _, e := range entries {
		if e.CallID != callID {
			continue
		}
		ev := e.Event
		sum, ok := byModel[ev.Model]
		if !ok {
			sum = &budget.UsageEvent{Model: ev.Model}
			byModel[ev.Model] = sum
			models = append(models, ev.Model)
		}
		sum.InputTokens += ev.InputTokens
		sum.OutputTokens += ev.OutputTokens
		sum.CacheReadTokens += ev.CacheReadTokens
		sum.CacheWriteTokens += ev.CacheWriteTokens
		sum.CacheWrite1hTokens += ev.CacheWrite1hTokens
		sum.ReasoningTokens += ev.ReasoningTokens
	}
	sort.Strings(models)
	out := make([]budget.UsageEvent, 0, len(models))
	for _, m := range models {
		out = append(out, *byModel[m])
	}
	return out, nil
}

func tokensText(recorded []budget.UsageEvent) string {
	var n int64
	for _, r := range recorded {
		n += r.Tokens()
	}
	return fmt.Sprintf("%d tokens", n)
}

// dropDeadOwnersHolds drops the holds on shared runs and named budgets that
// the task's previous owner left when it died (kill -9, a lost host, a
// worker whose lease ran out), instead of letting the resumed task wait
// out their TTL for holds nobody will release; it says how much it let go.
// The owner is the one recorded RUNNING on the task before this process
// claimed it, and only an owner Owners reports gone loses its holds: the
// claim succeeded, so it was. An owner whose process is known dead loses
// every hold it placed; one only given up on for this task (a lease ran
// out: it may run other tasks) loses this task's.
func (t *taskRun) dropDeadOwnersHolds(ctx context.Context, prior purser.TaskRecord) {
	owners := t.e.cfg.Owners
	if t.e.holds == nil || prior.State != purser.StateRunning || prior.Owner == "" || prior.Owner == t.e.owner || !owners.Gone(prior.Owner) {
		return
	}
	taskID, whose := t.task.ID, "for this task"
	if p, ok := owners.(purser.ProcessOwners); ok && p.ProcessGone(prior.Owner) {
		taskID, whose = "", "for every task (its process is gone)"
	}
	dropped, err := t.e.holds.DropHolds(ctx, prior.Owner, taskID)
	if err != nil {
		// Not a reason to fail the task: the holds still lapse after their TTL.
		t.log.Warn("dropping the holds the task's dead owner left; they lapse after their TTL", "owner", prior.Owner, "error", err)
		return
	}
	for _, d := range dropped {
		where, amount := droppedText(d)
		msg := fmt.Sprintf("released %d hold(s) of %s on %s that the task's previous owner (%s, gone) placed %s and never released",
			d.Holds, amount, where, prior.Owner, whose)
		t.log.Warn(msg, "owner", prior.Owner, "holds", d.Holds, "tokens", d.Held.Tokens, "usd", d.Held.USD)
		t.e.emit(t, purser.Event{Type: purser.EventWarning, Message: msg})
	}
}
