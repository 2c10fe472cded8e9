package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/sim"
	"github.com/purser-dev/purser/budget"
)

// txCountingStore counts the ledger transactions of calls' events, each
// taking delay to commit (a slow disk), so that a call's events arrive
// while one commits.
type txCountingStore struct {
	purser.Store
	delay   time.Duration
	discard bool // calls' entries are counted, not written: the engine's own cost

	mu  sync.Mutex
	txs []int // the call entries in each transaction
}

func (s *txCountingStore) AppendUsage(ctx context.Context, entries ...purser.LedgerEntry) error {
	calls := 0
	for _, en := range entries {
		if en.CallID != "" {
			calls++
		}
	}
	if calls > 0 {
		time.Sleep(s.delay)
	}
	if s.discard && calls == len(entries) {
		// counted below, not written
	} else if err := s.Store.AppendUsage(ctx, entries...); err != nil {
		return err
	}
	if calls > 0 {
		s.mu.Lock()
		s.txs = append(s.txs, calls)
		s.mu.Unlock()
	}
	return nil
}

func (s *txCountingStore) transactions() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.txs...)
}

// reportCounter is a backend that counts what it reports and sums its
// tokens, as the engine was told them.
type reportCounter struct {
	purser.Backend
	n, tokens atomic.Int64
}

func (r *reportCounter) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	return r.Backend.Call(ctx, req, func(ev budget.UsageEvent) {
		r.n.Add(1)
		r.tokens.Add(ev.Tokens())
		report(ev)
	})
}

// withCounting puts a slow counting store and a counting backend (the sim,
// or backend when not nil) under f.
func withCounting(f *fixture, delay time.Duration, backend purser.Backend) (*txCountingStore, *reportCounter) {
	store := &txCountingStore{Store: f.store, delay: delay}
	f.cfg.Store = store
	counter := &reportCounter{}
	f.cfg.Backends = func(spec purser.BackendSpec) (purser.Backend, error) {
		if backend != nil {
			counter.Backend = backend
			return counter, nil
		}
		b, err := sim.New(spec)
		counter.Backend = b
		return counter, err
	}
	return store, counter
}

// checkLedgerHasEveryReport fails unless the ledger holds every event the
// backend reported, each call's keys numbered in the order they came.
func checkLedgerHasEveryReport(t *testing.T, f *fixture, counter *reportCounter) {
	t.Helper()
	entries, err := f.store.Usage(context.Background(), f.task.ID)
	must(t, err)
	var n, tokens int64
	next := map[string]int{}
	for _, en := range entries {
		if en.CallID == "" {
			continue
		}
		n++
		tokens += en.Event.Tokens()
		next[en.CallID]++
		if want := fmt.Sprintf("%s/%d", en.CallID, next[en.CallID]); en.Key != want {
			t.Fatalf("ledger entry %d of call %s has key %q, want %q (order or key lost)", next[en.CallID], en.CallID, en.Key, want)
		}
	}
	if n != counter.n.Load() || tokens != counter.tokens.Load() {
		t.Fatalf("ledger holds %d call events (%d tokens); the backend reported %d (%d tokens)", n, tokens, counter.n.Load(), counter.tokens.Load())
	}
}

// A call's events that arrive while one of its appends commits share the
// next transaction; none is lost, their order and keys are kept.
func TestCallEventsShareTransactions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "steps: []\n")
	f.task.Validators = []purser.Validator{{Name: "ok", Run: "true", Timeout: 10 * time.Second}}
	// 30 events back to back, each commit taking 25 ms.
	store, counter := withCounting(f, 25*time.Millisecond, burstBackend{n: 30})
	must(t, f.run())
	checkLedgerHasEveryReport(t, f, counter)
	txs := store.transactions()
	events := int(counter.n.Load())
	if events != 30 {
		t.Fatalf("the backend reported %d events, want 30", events)
	}
	// Typically 2 (the first event, then the 29 queued behind it); one per
	// event (30) is what sequential appends took.
	if len(txs) > events/2 {
		t.Fatalf("%d events in %d transactions %v: want them batched (≤ %d)", events, len(txs), txs, events/2)
	}
	if got := budgetOf(t, f); got.UsedTokens != 30*1500 {
		t.Fatalf("the store's totals say %d tokens, want %d", got.UsedTokens, 30*1500)
	}
}

// The hard cap cuts a call mid-reply: every event it reported before the
// cut is in the ledger by the time the task stops, written behind or not.
func TestStoppedCallKeepsEveryEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, runaway)
	f.task.Budget = budget.Config{Hard: budget.HardLimits{Tokens: ptr(int64(10000)), MaxIterations: ptr(10)}}
	_, counter := withCounting(f, 15*time.Millisecond, nil)
	err := f.run()
	var be *budget.BudgetExhaustedError
	if !errors.As(err, &be) || be.Metric != budget.Tokens {
		t.Fatalf("RunTask = %v, want the token cap", err)
	}
	checkLedgerHasEveryReport(t, f, counter)
	if st := budgetOf(t, f); st.UsedTokens < 10000 || st.UsedTokens != counter.tokens.Load() {
		t.Fatalf("the ledger's totals: %d tokens; reported %d; want the cap of 10000 reached and all of it kept", st.UsedTokens, counter.tokens.Load())
	}
}
