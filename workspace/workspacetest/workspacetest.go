// Package workspacetest makes the workspaces the tests of workspace,
// contextbuild and the edit protocols share.
package workspacetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser/workspace"
)

// Tree makes a workspace "ws" in a temporary directory holding
// src/parser.go, README.md, a .gitignore that ignores build/ and *.log,
// build/out.bin, debug.log, a symlink link-in.go to src/parser.go, and a
// symlink link-out.txt to the file outside/secret.txt beside the workspace.
// It returns the workspace's path.
func Tree(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	for p, body := range map[string]string{
		"ws/src/parser.go":   "package src\n",
		"ws/README.md":       "readme\n",
		"ws/build/out.bin":   "binary\n",
		"ws/.gitignore":      "build/\n*.log\n",
		"ws/debug.log":       "noise\n",
		"outside/secret.txt": "do not read\n",
	} {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "outside/secret.txt"), filepath.Join(ws, "link-out.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/parser.go", filepath.Join(ws, "link-in.go")); err != nil {
		t.Fatal(err)
	}
	return ws
}

// PursersFiles makes a workspace holding Purser's own files: its state
// directory, STATUS.md and BUDGET.md at the root, a transcript and a
// database somewhere else inside, and an alias of .purser through a
// symlinked directory. It returns the workspace and a guard protecting the
// transcript (logs/calls.jsonl) and the database (data/ledger.sqlite).
func PursersFiles(t testing.TB) (string, *workspace.Guard) {
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
	guard := workspace.NewGuard(filepath.Join(ws, "logs/calls.jsonl"))
	guard.ProtectDatabase(filepath.Join(ws, "data/ledger.sqlite"))
	return ws, guard
}
