package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/postgres"
)

// A process watching a run hears of usage another process (another pool)
// commits to that run, and not of usage committed to another run or to the
// same run name in another schema.
func TestWatchRunUsageHearsOtherProcessesAppends(t *testing.T) {
	dbURL := newSchema(t)
	watcher, writer := open(t, dbURL), open(t, dbURL)
	elsewhere := open(t, newSchema(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes, err := watcher.WatchRunUsage(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	appendTo := func(s *postgres.Store, key, run string) {
		t.Helper()
		if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: key, TaskID: "t-" + run, RunID: run, Event: budget.UsageEvent{InputTokens: 5}}); err != nil {
			t.Fatal(err)
		}
	}
	appendTo(writer, "other-run", "weekly")
	appendTo(elsewhere, "other-schema", "nightly")
	select {
	case <-changes:
		t.Fatal("told of usage committed to another run or schema")
	case <-time.After(300 * time.Millisecond):
	}
	appendTo(writer, "k1", "nightly")
	select {
	case _, ok := <-changes:
		if !ok {
			t.Fatal("the watch ended instead of telling of the append")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not told of usage another process committed to the run")
	}
	cancel()
	for range changes { // closed once ctx ends
	}
}
