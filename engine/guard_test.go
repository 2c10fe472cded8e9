package engine_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser/workspace"
)

// Issue 19: the store's files and each backend's transcript are protected in
// the guard the wiring gives the engine (the SQLite store no longer protects
// itself as it opens), so that no agent of any task sharing the guard can
// write them: here a task whose workspace is the directory holding both.
func TestEngineGuardProtectsTheStoreAndTheBackendsFiles(t *testing.T) {
	f := newFixture(t, "steps:\n  - files: {src/fixed: done}\n")
	guard := workspace.NewGuard()
	f.cfg.Guard = guard
	for _, rel := range []string{"purser.db", "purser.db-wal", "calls.jsonl"} {
		if _, err := guard.Writable(f.dir, rel); err != nil {
			t.Fatalf("before the engine: Writable(%s) = %v", rel, err)
		}
	}
	f.engine()
	for _, rel := range []string{"purser.db", "purser.db-wal", "purser.db-shm", "purser.db-journal"} {
		if _, err := guard.Writable(f.dir, rel); !errors.Is(err, workspace.ErrProtected) {
			t.Errorf("after New: Writable(%s) = %v, want ErrProtected", rel, err)
		}
	}
	if err := f.run(); err != nil {
		t.Fatal(err)
	}
	if _, err := guard.Writable(f.dir, "calls.jsonl"); !errors.Is(err, workspace.ErrProtected) {
		t.Errorf("after the task ran: Writable(calls.jsonl) = %v, want ErrProtected", err)
	}
}

// Each call hands the backend the engine's guard: a sim step writing a file
// the guard protects (neither Purser's by name nor the sim's own) is
// refused, and the file keeps its content.
func TestCallsCarryTheEnginesGuard(t *testing.T) {
	f := newFixture(t, "steps:\n  - files: {notes/unrelated.txt: forged}\n")
	f.cfg.Guard = workspace.NewGuard(filepath.Join(f.workspace, "notes/unrelated.txt"))
	err := f.run()
	if !errors.Is(err, workspace.ErrProtected) {
		t.Fatalf("RunTask = %v, want ErrProtected", err)
	}
	if got := readFile(t, filepath.Join(f.workspace, "notes/unrelated.txt")); got != "nothing to see here\n" {
		t.Fatalf("the protected file was rewritten: %q", got)
	}
}
