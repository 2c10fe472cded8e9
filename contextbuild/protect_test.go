package contextbuild_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser/contextbuild"
)

// pursersFiles makes a workspace holding Purser's own files: its state
// directory, STATUS.md and BUDGET.md at the root, a transcript and a
// database somewhere else inside, and an alias of .purser through a
// symlinked directory.
func pursersFiles(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	for _, p := range []string{".purser/purser.db", "STATUS.md", "BUDGET.md", "logs/calls.jsonl", "data/ledger.sqlite", "src/main.go", "docs/STATUS.md"} {
		if err := os.MkdirAll(filepath.Join(ws, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, p), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(".purser", filepath.Join(ws, "state")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("data", filepath.Join(ws, "db-dir")); err != nil {
		t.Fatal(err)
	}
	contextbuild.Protect(filepath.Join(ws, "logs/calls.jsonl"))
	contextbuild.ProtectDatabase(filepath.Join(ws, "data/ledger.sqlite"))
	return ws
}

// Issue 15 #2: Purser's own files are not writable through Writable,
// wherever they are and however they are named.
func TestWritableRefusesPursersOwnFiles(t *testing.T) {
	ws := pursersFiles(t)
	for _, rel := range []string{".purser/purser.db", ".purser/purser.db-wal", ".purser", "sub/.purser/x", ".Purser/purser.db",
		"STATUS.md", "BUDGET.md", "status.md", "STATUS.md/x", "state/purser.db", "state/new.txt",
		"logs/calls.jsonl", "data/ledger.sqlite", "data/ledger.sqlite-wal", "data/ledger.sqlite-shm", "data/ledger.sqlite-journal",
		"data/ledger.sqlite-journal/x", "db-dir/ledger.sqlite", "./src/../data/ledger.sqlite"} {
		if _, err := contextbuild.Writable(ws, rel); !errors.Is(err, contextbuild.ErrProtected) {
			t.Errorf("Writable(%q) = %v, want ErrProtected", rel, err)
		}
	}
	for _, rel := range []string{"src/main.go", "docs/STATUS.md", "logs/other.jsonl", "data/ledger.sqlite.bak", "purser.db"} {
		if _, err := contextbuild.Writable(ws, rel); err != nil {
			t.Errorf("Writable(%q) = %v, want it allowed", rel, err)
		}
	}
}

func TestListingLeavesOutPursersOwnFiles(t *testing.T) {
	ws := pursersFiles(t)
	l := "\n" + contextbuild.Listing(ws) + "\n"
	for _, want := range []string{"src/main.go", "docs/STATUS.md"} {
		if !strings.Contains(l, "\n"+want+"\n") {
			t.Errorf("listing lacks %s:\n%s", want, l)
		}
	}
	for _, hidden := range []string{".purser", "\nSTATUS.md", "BUDGET.md", "calls.jsonl", "ledger.sqlite"} {
		if strings.Contains(l, hidden) {
			t.Errorf("listing shows Purser's %s:\n%s", hidden, l)
		}
	}
}
