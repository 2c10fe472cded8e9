package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/sqlite"
)

// A process watching a run hears of usage another process (another store
// on the file) commits to that run within a few tens of milliseconds — not
// at the next 500 ms poll — and not of usage committed to another run or
// of other writes.
func TestWatchRunUsageHearsOtherProcessesAppends(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path := filepath.Join(t.TempDir(), "purser.db")
	watcher, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	writer, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	changes, err := watcher.WatchRunUsage(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	appendTo := func(key, run string) {
		t.Helper()
		if err := writer.AppendUsage(ctx, purser.LedgerEntry{Key: key, TaskID: "t-" + run, RunID: run, Event: budget.UsageEvent{InputTokens: 5}}); err != nil {
			t.Fatal(err)
		}
	}
	appendTo("other-run", "weekly")
	select {
	case <-changes:
		t.Fatal("told of usage committed to another run")
	case <-time.After(200 * time.Millisecond):
	}
	for i := range 5 {
		appendTo(string(rune('a'+i)), "nightly")
		// From the commit, not from before the append: the writer's own
		// transaction (slow under -race on a loaded machine) is not the
		// watch's delay.
		committed := time.Now()
		select {
		case _, ok := <-changes:
			if !ok {
				t.Fatal("the watch ended instead of telling of the append")
			}
			// Generous for a loaded machine, still well under the 500 ms poll.
			if d := time.Since(committed); d > 250*time.Millisecond {
				t.Errorf("told %s after the commit, want within tens of milliseconds", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("not told of usage another process committed to the run")
		}
		time.Sleep(100 * time.Millisecond) // the watch backs off to its slowest pace
	}
	cancel()
	for range changes { // closed once ctx ends
	}
}
