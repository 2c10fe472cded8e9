package engine

import (
	"context"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/tick"
)

// A run may be shared by processes on many hosts (a named run, a fleet of
// workers). Its budget.Manager in this process records what this process's
// tasks spend as it streams in; what the others spend reaches it from the
// store: the run's ledger totals are read back at each admission, every
// Config.RunRefresh, and on each change a RunUsageWatcher tells of. So the
// run's tier, its HARD and the cancellation of calls in flight follow the
// run's actual spend everywhere, not this process's share of it.
//
// What the others spent is never over-counted. A call's events are recorded
// on the budget as they arrive and appended to the ledger behind
// (ledgerwrite.go); an event outside a call is appended first. So at any
// moment some of this process's events may be in the store and not yet on
// the Manager, and others on the Manager and not yet in the store. The sync
// counts each of this process's events as soon as its append begins (its
// "intent"), and takes
//
//	others ≥ store totals − the totals the Manager started from − intent
//
// which is a lower bound: every event of this process in the store is in
// intent, and some in intent may not be in the store yet (they are then
// counted on the next read). budget.Manager.SetExternal keeps the largest
// lower bound given, so a read that raced a recording never takes spend
// back.

// runSync keeps one run's Manager in this process in step with the run's
// spend in every process.
type runSync struct {
	e       *Engine
	runID   string
	mgr     *budget.Manager
	initial budget.Totals // the run's store totals when mgr was made

	mu     sync.Mutex
	intent budget.Totals // this process's events of the run whose append began
}

// count adds events this process is about to append to the run's ledger.
func (s *runSync) count(ev budget.UsageEvent) {
	s.mu.Lock()
	s.intent.Add(ev)
	s.mu.Unlock()
}

// refresh reads the run's totals from the store and gives the Manager what
// the other processes spent. A failed read is logged and changes nothing:
// the next refresh tries again.
func (s *runSync) refresh(ctx context.Context) {
	stored, err := s.e.cfg.Store.RunUsageTotals(ctx, s.runID)
	if err != nil {
		if ctx.Err() == nil {
			s.e.cfg.Logger.Warn("reading the run's spend across processes", "run", s.runID, "error", err)
		}
		return
	}
	// Read after the store: every event of ours the read saw is in it.
	s.mu.Lock()
	intent := s.intent
	s.mu.Unlock()
	// SetExternal takes neither wall time (a run's time is its own clock)
	// nor list prices.
	s.mgr.SetExternal(stored.Minus(s.initial).Minus(intent))
}

// follow keeps the run in step while its tasks run here: a refresh every
// Config.RunRefresh, and on each change the store tells of. The returned
// function stops it and waits for it.
func (s *runSync) follow(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopPoll := tick.Every(s.e.cfg.RunRefresh, func() { s.refresh(ctx) })
	var wg sync.WaitGroup
	if s.e.watcher != nil {
		changes, err := s.e.watcher.WatchRunUsage(ctx, s.runID)
		if err != nil {
			s.e.cfg.Logger.Warn("watching the run's spend across processes; polling only", "run", s.runID, "error", err)
		} else {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range changes {
					s.refresh(ctx)
				}
			}()
		}
	}
	return func() {
		stopPoll()
		cancel()
		wg.Wait()
	}
}

// runSyncs are the run syncs of an engine, by the tasks they run: an event
// counts on the sync of the task that spent it, and only there (two
// batches of one run in one process each see the other's spend through the
// store).
type runSyncs struct {
	mu     sync.Mutex
	byTask map[string]*runSync

	// pending are the calls' ledger writers: a hold in the database is
	// released only after the spend it covered is committed.
	pending pendingWriters
}

func newRunSyncs() *runSyncs { return &runSyncs{byTask: map[string]*runSync{}} }

// add makes s the sync of tasks until the returned function is called.
func (r *runSyncs) add(s *runSync, tasks []string) (remove func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range tasks {
		r.byTask[id] = s
	}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, id := range tasks {
			if r.byTask[id] == s {
				delete(r.byTask, id)
			}
		}
	}
}

func (r *runSyncs) ofTask(taskID string) *runSync {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byTask[taskID]
}

// ofRun returns the syncs of a run.
func (r *runSyncs) ofRun(runID string) []*runSync {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runSync
	for _, s := range r.byTask {
		if s.runID == runID && !containsSync(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func containsSync(ss []*runSync, s *runSync) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// ledgerTap is the engine's store: each ledger entry of a task running in
// a shared run counts on the run's sync before it is appended.
type ledgerTap struct {
	purser.Store
	runs *runSyncs
}

// AppendUsage counts the entries on their runs' syncs, then appends them.
// An append that fails leaves them counted, which only makes the others'
// spend read lower until the task stops.
func (l *ledgerTap) AppendUsage(ctx context.Context, entries ...purser.LedgerEntry) error {
	for _, en := range entries {
		if s := l.runs.ofTask(en.TaskID); s != nil && s.runID == en.RunID {
			s.count(en.Event)
		}
	}
	return l.Store.AppendUsage(ctx, entries...)
}

// admitTap is the engine's shared run budget: right after a hold on a run
// is granted, the run's spend across processes is read back, so that the
// admission in this process judges the run on everyone's spend.
type admitTap struct {
	purser.SharedRunBudget
	runs *runSyncs
}

// ReserveRun holds want on the run through the store, then refreshes the
// run's spend in this process — after a refusal too, so that whether the
// others' holds or their spend stood in the way is judged on fresh figures.
func (a *admitTap) ReserveRun(ctx context.Context, runID string, by purser.Holder, caps, want budget.Amount, ttl time.Duration) (func(), error) {
	release, err := a.SharedRunBudget.ReserveRun(ctx, runID, by, caps, want, ttl)
	for _, s := range a.runs.ofRun(runID) {
		s.refresh(ctx)
	}
	if err != nil {
		return release, err
	}
	return a.runs.flushBefore(by.TaskID, release), nil
}

// flushBefore returns release, run once the task's queued ledger entries are
// committed: a hold that leaves the database before the spend it covered
// enters it would let another process admit into that spend.
func (r *runSyncs) flushBefore(taskID string, release func()) func() {
	if release == nil {
		return nil
	}
	return func() {
		r.pending.flush(taskID)
		release()
	}
}

// namedTap is the engine's named budgets: a named hold's release waits for
// the spend it covered, as admitTap's does.
type namedTap struct {
	purser.NamedBudgets
	runs *runSyncs
}

// ReserveNamed holds want on name and its ancestors; the release waits for
// by's task's queued ledger entries.
func (n *namedTap) ReserveNamed(ctx context.Context, name string, by purser.Holder, want budget.Amount, now time.Time, ttl time.Duration) (func(), error) {
	release, err := n.NamedBudgets.ReserveNamed(ctx, name, by, want, now, ttl)
	if err != nil {
		return release, err
	}
	return n.runs.flushBefore(by.TaskID, release), nil
}

// ReserveNamedAll holds want on every budget in names and their ancestors;
// the release waits for by's task's queued ledger entries.
func (n *namedTap) ReserveNamedAll(ctx context.Context, names []string, by purser.Holder, want budget.Amount, now time.Time, ttl time.Duration) (func(), error) {
	release, err := n.NamedBudgets.ReserveNamedAll(ctx, names, by, want, now, ttl)
	if err != nil {
		return release, err
	}
	return n.runs.flushBefore(by.TaskID, release), nil
}
