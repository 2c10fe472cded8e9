package workspace_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser/workspace"
	"github.com/purser-dev/purser/workspace/workspacetest"
)

// Issue 15 #2: Purser's own files are not writable through Writable,
// wherever they are and however they are named.
func TestWritableRefusesPursersOwnFiles(t *testing.T) {
	ws, guard := workspacetest.PursersFiles(t)
	for _, rel := range []string{".purser/purser.db", ".purser/purser.db-wal", ".purser", "sub/.purser/x", ".Purser/purser.db",
		"STATUS.md", "BUDGET.md", "status.md", "STATUS.md/x", "state/purser.db", "state/new.txt",
		"logs/calls.jsonl", "data/ledger.sqlite", "data/ledger.sqlite-wal", "data/ledger.sqlite-shm", "data/ledger.sqlite-journal",
		"data/ledger.sqlite-journal/x", "db-dir/ledger.sqlite", "./src/../data/ledger.sqlite"} {
		if _, err := guard.Writable(ws, rel); !errors.Is(err, workspace.ErrProtected) {
			t.Errorf("Writable(%q) = %v, want ErrProtected", rel, err)
		}
	}
	for _, rel := range []string{"src/main.go", "docs/STATUS.md", "logs/other.jsonl", "data/ledger.sqlite.bak", "purser.db"} {
		if _, err := guard.Writable(ws, rel); err != nil {
			t.Errorf("Writable(%q) = %v, want it allowed", rel, err)
		}
	}
}

// A nil guard still refuses Purser's files by name; With protects the
// files given to it besides the guard's, and leaves the guard as it was.
func TestGuardWithAndNil(t *testing.T) {
	ws, guard := workspacetest.PursersFiles(t)
	var none *workspace.Guard
	if _, err := none.Writable(ws, ".purser/purser.db"); !errors.Is(err, workspace.ErrProtected) {
		t.Errorf("nil guard: Writable(.purser/purser.db) = %v, want ErrProtected", err)
	}
	if _, err := none.Writable(ws, "logs/calls.jsonl"); err != nil {
		t.Errorf("nil guard: Writable(logs/calls.jsonl) = %v, want it allowed", err)
	}
	with := guard.With(filepath.Join(ws, "src/main.go"))
	for _, rel := range []string{"src/main.go", "logs/calls.jsonl", "data/ledger.sqlite-wal"} {
		if _, err := with.Writable(ws, rel); !errors.Is(err, workspace.ErrProtected) {
			t.Errorf("With: Writable(%s) = %v, want ErrProtected", rel, err)
		}
	}
	if _, err := guard.Writable(ws, "src/main.go"); err != nil {
		t.Errorf("the guard With was called on: Writable(src/main.go) = %v, want it allowed", err)
	}
}
