package sim_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/sim"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/workspace"
)

// Issue 15 #4: a workspace file hard-linked to one outside is replaced by a
// new file, never written through; the file outside keeps its content.
func TestFilesDoNotWriteThroughHardLinks(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "bashrc")
	if err := os.WriteFile(secret, []byte("the user's shell setup\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, dir := newSim(t, "steps:\n  - files: {setup.sh: pwned}\n")
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(ws, "setup.sh")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Call(context.Background(), purser.CallRequest{Workspace: ws}, func(budget.UsageEvent) {}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(secret); string(got) != "the user's shell setup\n" {
		t.Fatalf("the file outside the workspace was written through a hard link: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "setup.sh")); string(got) != "pwned" {
		t.Fatalf("the workspace file = %q", got)
	}
}

// Issue 15 #2: a step cannot rewrite the transcript or Purser's state
// directory, even when the transcript lives inside the workspace.
func TestFilesCannotTouchPursersOwnFiles(t *testing.T) {
	for _, file := range []string{"ws/calls.jsonl", "ws/.purser/purser.db", "ws/STATUS.md"} {
		t.Run(file, func(t *testing.T) {
			dir := t.TempDir()
			ws := filepath.Join(dir, "ws")
			if err := os.MkdirAll(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			script := "steps:\n  - files: {" + filepath.Base(file) + ": forged}\n"
			if filepath.Base(filepath.Dir(file)) == ".purser" {
				script = "steps:\n  - files: {.purser/purser.db: forged}\n"
			}
			if err := os.WriteFile(filepath.Join(dir, "sim.yaml"), []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			b, err := sim.New(purser.BackendSpec{Type: "sim", Dir: dir, Options: map[string]any{"script": "sim.yaml", "transcript": "ws/calls.jsonl"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, file)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, file), []byte("purser's\n"), 0o600); err != nil && file != "ws/calls.jsonl" {
				t.Fatal(err)
			}
			_, err = b.Call(context.Background(), purser.CallRequest{Workspace: ws}, func(budget.UsageEvent) {})
			if !errors.Is(err, workspace.ErrProtected) {
				t.Fatalf("Call = %v, want ErrProtected", err)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, file)); strings.Contains(string(got), "forged") {
				t.Fatalf("%s was rewritten by the agent: %q", file, got)
			}
		})
	}
}
