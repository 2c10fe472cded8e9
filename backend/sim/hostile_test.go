package sim_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
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
