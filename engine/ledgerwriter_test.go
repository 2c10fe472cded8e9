package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
)

// gatedStore commits AppendUsage only when let through, and keeps what it
// committed, in order.
type gatedStore struct {
	purser.Store
	gate chan struct{}
	fail error

	mu        sync.Mutex
	committed []purser.LedgerEntry
	txs       int
}

func (g *gatedStore) AppendUsage(_ context.Context, entries ...purser.LedgerEntry) error {
	<-g.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fail != nil {
		return g.fail
	}
	g.committed = append(g.committed, entries...)
	g.txs++
	return nil
}

func (g *gatedStore) keys() (keys []string, txs int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, en := range g.committed {
		keys = append(keys, en.Key)
	}
	return keys, g.txs
}

func keyed(i int) purser.LedgerEntry {
	return purser.LedgerEntry{Key: fmt.Sprintf("c/%d", i), CallID: "c"}
}

// Events queued while one commits go together in the next transaction, in
// order; append does not wait for them.
func TestLedgerWriterBatchesWhatArrivesDuringACommit(t *testing.T) {
	store := &gatedStore{gate: make(chan struct{})}
	w := newLedgerWriter(context.Background(), store, nil)
	for i := 1; i <= 5; i++ {
		if err := w.append(keyed(i)); err != nil { // the store is shut: append must not wait
			t.Fatal(err)
		}
	}
	close(store.gate)
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	keys, txs := store.keys()
	if fmt.Sprint(keys) != "[c/1 c/2 c/3 c/4 c/5]" || txs > 2 {
		t.Fatalf("committed %v in %d transactions; want c/1..c/5 in order, in at most 2", keys, txs)
	}
	// Closed: an append returns only once it is committed.
	if err := w.append(keyed(6)); err != nil {
		t.Fatal(err)
	}
	if keys, _ := store.keys(); len(keys) != 6 {
		t.Fatalf("after a closed writer's append returned, %d entries committed, want 6", len(keys))
	}
}

// A failed append is told to after and returned by flush, and the entries
// after it are still tried: the budget has counted them, so the ledger
// gets every chance to (a store that recovers gets them).
func TestLedgerWriterFailureIsToldAndLaterEntriesTried(t *testing.T) {
	store := &gatedStore{gate: make(chan struct{}), fail: errors.New("disk full")}
	close(store.gate)
	var told error
	var mu sync.Mutex
	w := newLedgerWriter(context.Background(), store, func(_ []purser.LedgerEntry, err error) {
		mu.Lock()
		if told == nil {
			told = err
		}
		mu.Unlock()
	})
	_ = w.append(keyed(1))
	if err := w.flush(); err == nil || err.Error() != "disk full" {
		t.Fatalf("flush = %v, want the store's failure", err)
	}
	mu.Lock()
	if told == nil {
		t.Fatal("after was not told of the failure")
	}
	mu.Unlock()
	store.mu.Lock()
	store.fail = nil // the store recovers
	store.mu.Unlock()
	_ = w.append(keyed(2))
	if err := w.flush(); err == nil {
		t.Fatal("flush forgot the first failure")
	}
	if keys, _ := store.keys(); len(keys) != 1 || keys[0] != keyed(2).Key {
		t.Fatalf("committed %v after the failure, want the later entry %s tried and written", keys, keyed(2).Key)
	}
}

// A hold in the database is released only once its task's queued events are
// committed: another process must never see the hold gone and the spend not
// there yet.
func TestHoldReleaseWaitsForTheTasksLedger(t *testing.T) {
	store := &gatedStore{gate: make(chan struct{})}
	runs := newRunSyncs()
	w := newLedgerWriter(context.Background(), store, nil)
	remove := runs.pending.add("task", w)
	defer remove()
	if err := w.append(keyed(1)); err != nil {
		t.Fatal(err)
	}
	var sawAtRelease int
	released := make(chan struct{})
	release := runs.flushBefore("task", func() {
		keys, _ := store.keys()
		sawAtRelease = len(keys)
		close(released)
	})
	go release()
	select {
	case <-released:
		t.Fatal("the hold was released before the task's event was committed")
	case <-time.After(50 * time.Millisecond):
	}
	close(store.gate)
	<-released
	if sawAtRelease != 1 {
		t.Fatalf("at the release %d entries were committed, want 1", sawAtRelease)
	}
	// Another task's release does not wait for this task's writer.
	if release := runs.flushBefore("other", func() {}); release == nil {
		t.Fatal("flushBefore dropped a release")
	}
}

// A flush waits for what was queued when it began, not for a call that keeps
// streaming behind it.
func TestLedgerWriterFlushDoesNotWaitForLaterEvents(t *testing.T) {
	store := &gatedStore{gate: make(chan struct{}, 100)}
	w := newLedgerWriter(context.Background(), store, nil)
	if err := w.append(keyed(1)); err != nil {
		t.Fatal(err)
	}
	// What flush takes when it begins, taken here: a flush goroutine not yet
	// scheduled when c/2 is appended would otherwise take c/2 too.
	w.mu.Lock()
	upTo := w.queued
	w.mu.Unlock()
	flushed := make(chan error, 1)
	go func() { flushed <- w.flushUpTo(upTo) }()
	if err := w.append(keyed(2)); err != nil {
		t.Fatal(err)
	}
	store.gate <- struct{}{} // c/1 commits; c/2 waits at the gate
	select {
	case err := <-flushed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("flush waited for an event queued after it began")
	}
	store.gate <- struct{}{}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	if keys, _ := store.keys(); fmt.Sprint(keys) != "[c/1 c/2]" {
		t.Fatalf("committed %v, want [c/1 c/2]", keys)
	}
}
