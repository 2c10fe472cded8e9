package storetest

import (
	"testing"
	"time"

	"github.com/purser-dev/purser"
)

// A store's change mark moves across every commit, whichever handle (a
// process of its own, in production) made it: what the dashboard and
// /metrics rely on to serve what they last read while it stands.
func testChangeMarkMovesOnEveryCommit(t *testing.T, open Opener) {
	ctx := t.Context()
	a, b := open(t), open(t)
	cm, ok := a.(purser.ChangeMarker)
	if !ok {
		t.Fatalf("%T is not a purser.ChangeMarker", a)
	}
	mark := func() string {
		t.Helper()
		m, err := cm.ChangeMark(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	at := time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC)
	before := mark()
	if err := b.SaveTask(ctx, purser.TaskRecord{ID: "t", RunID: "r", State: purser.StateRunning, CreatedAt: at, UpdatedAt: at}); err != nil {
		t.Fatal(err)
	}
	afterOther := mark()
	if afterOther == before {
		t.Fatalf("the mark stayed %q across another handle's commit", before)
	}
	if err := a.AppendUsage(ctx, purser.LedgerEntry{Key: "k", TaskID: "t", RunID: "r", At: at}); err != nil {
		t.Fatal(err)
	}
	if afterOwn := mark(); afterOwn == afterOther {
		t.Fatalf("the mark stayed %q across its own handle's commit", afterOther)
	}
}
