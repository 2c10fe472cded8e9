package engine

import (
	"context"
	"sync"
	"time"

	"github.com/purser-dev/purser"
)

// A call's usage is written behind. The budget acts on each event the moment
// it arrives (RecordUsage: the tiers, HARD and the call's cancellation stay
// immediate and in memory), while the ledger append is pipelined: at most one
// transaction is in flight per call, and the events that arrive meanwhile
// share the next one. A call's events thus cost about one transaction per
// commit time instead of one each (a 1-row SQLite transaction writes ≈ 7
// pages; ten events in one write ≈ 1.2 pages each).
//
// What must be durable is waited for:
//   - the call's end (makeCall) waits for every event queued, before its
//     outcome is judged, its record saved and its holds released;
//   - every hold in the database (a shared run's, a named budget's) is
//     released only once the task's queued events are committed (admitTap,
//     namedTap in runsync.go): another process never sees a hold gone
//     before the spend it covered is in the ledger;
//   - an event that is not part of a call (an iteration's end) waits too;
//   - a task that draws from named budgets appends each event before the
//     next, as before: their spend is the ledger's, read after each event,
//     and the cut at their cap must come within one event.
//
// Loss on kill -9: the events of the transaction in flight and those queued
// behind it — about one commit's time of a call's events (≈ 0.1–1 ms on
// SQLite, a round trip on PostgreSQL). It is bounded by flushDeadline and
// maxQueued: once the transaction in flight is older than flushDeadline, or
// maxQueued events wait, an event's report waits for its own commit, as every
// event did before. For a CLI call or a call through Purser's door the
// resume recovers what the ledger lacks from the CLI's session file or the
// wire journal (recover.go), as for a kill in the middle of a reply; for an
// in-process backend those events are lost from the ledger (the provider
// billed them): at most flushDeadline's worth of one call's events.

// flushDeadline is how long an event may wait for a transaction before its
// report waits for the commit itself.
const flushDeadline = 200 * time.Millisecond

// maxQueued is how many events may wait behind the transaction in flight
// before a report waits for its own.
const maxQueued = 256

// ledgerWriter appends one call's ledger entries, one transaction at a
// time, those that arrive while one commits together in the next, in the
// order they were given.
type ledgerWriter struct {
	store purser.Store
	ctx   context.Context // without cancellation: bookkeeping outlives a stop
	// after is told of each transaction, committed (err nil) or not, before
	// a flush waiting for it returns; never with the writer's lock held.
	after func(batch []purser.LedgerEntry, err error)

	mu     sync.Mutex
	cond   sync.Cond
	queue  []purser.LedgerEntry
	busy   bool      // a transaction is in flight (or about to be)
	since  time.Time // when the transaction in flight began
	queued uint64    // entries ever queued
	done   uint64    // entries committed or given up
	// synchronous: each append waits for its commit — the call ended, or
	// its task draws from named budgets, whose spend is read from the
	// ledger after each event (checkNamedSpend): the cut at their cap must
	// come within one event, as it did.
	synchronous bool
	err         error // the first failed append: every later one fails with it
}

func newLedgerWriter(ctx context.Context, store purser.Store, after func([]purser.LedgerEntry, error)) *ledgerWriter {
	w := &ledgerWriter{store: store, ctx: ctx, after: after}
	w.cond.L = &w.mu
	return w
}

// append queues en behind the transaction in flight, or starts one. It waits
// for en's commit only when the writer is behind (flushDeadline, maxQueued)
// or closed. It returns the writer's first failure, if any. An entry is
// queued and tried even after a failure: the budget has counted it
// (usageSink.report), so the ledger must be given every chance to as well
// (a failure of the copy to a user-level budgets database, say, leaves the
// project's ledger appended and the next transaction heals the copy).
func (w *ledgerWriter) append(en purser.LedgerEntry) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = append(w.queue, en)
	w.queued++
	mine := w.queued
	if !w.busy {
		w.busy, w.since = true, time.Now()
		go w.run()
		if !w.synchronous {
			return nil
		}
	} else if !w.synchronous && len(w.queue) < maxQueued && time.Since(w.since) < flushDeadline {
		return nil
	}
	for w.done < mine {
		w.cond.Wait()
	}
	return w.err
}

// run commits the queue, a transaction at a time, until it is empty.
func (w *ledgerWriter) run() {
	w.mu.Lock()
	for len(w.queue) > 0 {
		batch := w.queue
		w.queue, w.since = nil, time.Now()
		w.mu.Unlock()
		err := w.store.AppendUsage(w.ctx, batch...)
		if w.after != nil {
			w.after(batch, err)
		}
		w.mu.Lock()
		w.done += uint64(len(batch))
		if err != nil && w.err == nil {
			// The first failure is kept and reported (the call is
			// cancelled with it: usageSink.fail); what waits behind it is
			// still tried.
			w.err = err
		}
		w.cond.Broadcast()
	}
	w.busy = false
	w.cond.Broadcast()
	w.mu.Unlock()
}

// flush waits until every entry queued so far is committed (or given up)
// and returns the writer's first failure. Entries queued after it began are
// not waited for: a call that keeps streaming does not hold a release back.
func (w *ledgerWriter) flush() error {
	w.mu.Lock()
	upTo := w.queued
	w.mu.Unlock()
	return w.flushUpTo(upTo)
}

// flushUpTo waits until the first upTo entries ever queued are committed
// (or given up), and returns the first error.
func (w *ledgerWriter) flushUpTo(upTo uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.done < upTo {
		w.cond.Wait()
	}
	return w.err
}

// close flushes, and makes every later append wait for its own commit (a
// backend's goroutine that reports after its call returned).
func (w *ledgerWriter) close() error {
	w.mustWait()
	return w.flush()
}

// mustWait makes every later append wait for its own commit.
func (w *ledgerWriter) mustWait() {
	w.mu.Lock()
	w.synchronous = true
	w.mu.Unlock()
}

// pendingWriters are the ledger writers of the calls in flight, by task: a
// hold in the database is released only after its task's writers flushed.
type pendingWriters struct {
	mu     sync.Mutex
	byTask map[string]map[*ledgerWriter]struct{}
}

// add registers w under taskID until the returned function is called.
func (p *pendingWriters) add(taskID string, w *ledgerWriter) (remove func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byTask == nil {
		p.byTask = map[string]map[*ledgerWriter]struct{}{}
	}
	ws := p.byTask[taskID]
	if ws == nil {
		ws = map[*ledgerWriter]struct{}{}
		p.byTask[taskID] = ws
	}
	ws[w] = struct{}{}
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.byTask[taskID], w)
		if len(p.byTask[taskID]) == 0 {
			delete(p.byTask, taskID)
		}
	}
}

// flush waits for every writer of taskID to commit what it has queued. A
// writer's failure is its call's to report, not the flusher's.
func (p *pendingWriters) flush(taskID string) {
	p.mu.Lock()
	var ws []*ledgerWriter
	for w := range p.byTask[taskID] {
		ws = append(ws, w)
	}
	p.mu.Unlock()
	for _, w := range ws {
		_ = w.flush()
	}
}
