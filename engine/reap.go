package engine

import (
	"context"
	"fmt"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// reapDeadHolds drops the holds that gone holders left on shared runs and
// named budgets, for a call waiting for room: a worker killed while its
// holds fill a run would otherwise stall every call that waits beside them
// for the holds' TTL (the call's timeout and a minute), and with every
// worker slot waiting nobody would claim the dead worker's job, whose
// takeover is the other place its holds are dropped. A holder is gone when
// its job's lease ran out (by the store's clock, on any host), or when
// Owners knows its process is (on this host: its pid and start time). It
// reports whether it dropped any; a store error is logged and the holds
// are left to lapse.
func (t *taskRun) reapDeadHolds(ctx context.Context) bool {
	e := t.e
	if e.reaper == nil {
		return false
	}
	dropped, err := e.reaper.DropLapsedHolds(ctx)
	if err != nil {
		t.log.Warn("dropping the holds of workers whose leases ran out; they lapse after their TTL", "error", err)
		return false
	}
	for _, d := range dropped {
		t.saidDropped(d, "its job's lease ran out")
	}
	reaped := len(dropped) > 0
	owners, ok := e.cfg.Owners.(purser.ProcessOwners)
	if !ok || e.holds == nil {
		return reaped
	}
	holders, err := e.reaper.Holders(ctx)
	if err != nil {
		t.log.Warn("listing who holds what a waiting call needs", "error", err)
		return reaped
	}
	seen := map[string]bool{}
	for _, h := range holders {
		if h.Owner == "" || h.Owner == e.owner || seen[h.Owner] {
			continue
		}
		seen[h.Owner] = true
		if !owners.ProcessGone(h.Owner) {
			continue
		}
		dropped, err := e.holds.DropHolds(ctx, h.Owner, "")
		if err != nil {
			t.log.Warn("dropping the holds of a process that is gone; they lapse after their TTL", "owner", h.Owner, "error", err)
			continue
		}
		for _, d := range dropped {
			d.Owner = h.Owner
			t.saidDropped(d, "its process is gone")
		}
		reaped = reaped || len(dropped) > 0
	}
	return reaped
}

// saidDropped says, in the log and the live view, which holds a waiting
// call let go and why their holder was taken as gone.
func (t *taskRun) saidDropped(d purser.DroppedHolds, why string) {
	where, amount := droppedText(d)
	msg := fmt.Sprintf("released %d hold(s) of %s on %s that %s placed and never released (%s), instead of waiting out their TTL",
		d.Holds, amount, where, d.Owner, why)
	t.log.Warn(msg, "owner", d.Owner, "holds", d.Holds, "tokens", d.Held.Tokens, "usd", d.Held.USD)
	t.e.emit(t, purser.Event{Type: purser.EventWarning, Message: msg})
}

// droppedText is where dropped holds were (a run or a named budget) and
// what they held, in words.
func droppedText(d purser.DroppedHolds) (where, amount string) {
	where = fmt.Sprintf("run %s", d.Name)
	if d.Scope == budget.ScopeNamed {
		where = fmt.Sprintf("named budget %s", d.Name)
	}
	amount = fmt.Sprintf("%d tokens", d.Held.Tokens)
	if d.Held.USD > 0 {
		amount += fmt.Sprintf(" and %s", d.Held.USD)
	}
	return where, amount
}
