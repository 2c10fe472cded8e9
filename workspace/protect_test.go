package workspace_test

import (
	"errors"
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
