package workspace_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser/workspace"
	"github.com/purser-dev/purser/workspace/workspacetest"
)

// Issue-referenced paths never reach outside the workspace.
func TestResolveRefusesPathsOutsideWorkspace(t *testing.T) {
	ws := workspacetest.Tree(t)
	for _, bad := range []string{"../outside/secret.txt", "/etc/passwd", "src/../../outside/secret.txt", "link-out.txt", "src/parser.go\x00.txt", ".."} {
		if _, err := workspace.Resolve(ws, bad); !errors.Is(err, workspace.ErrOutsideWorkspace) {
			t.Errorf("Resolve(%q) = %v, want ErrOutsideWorkspace", bad, err)
		}
	}
	for _, good := range []string{"src/parser.go", "./README.md", "link-in.go"} {
		if _, err := workspace.Resolve(ws, good); err != nil {
			t.Errorf("Resolve(%q) = %v", good, err)
		}
	}
}

// Writable confines a file to be written, which need not exist yet.
func TestWritableRefusesPathsOutsideWorkspace(t *testing.T) {
	ws := workspacetest.Tree(t)
	guard := workspace.NewGuard()
	for _, bad := range []string{"../outside/new.txt", "/tmp/x", "a/../../x", "link-out.txt", "x\x00y", ".", ""} {
		if _, err := guard.Writable(ws, bad); !errors.Is(err, workspace.ErrOutsideWorkspace) && !strings.Contains(fmt.Sprint(err), "symlink") {
			t.Errorf("Writable(%q) = %v, want a refusal", bad, err)
		}
	}
	os.Symlink(filepath.Join(filepath.Dir(ws), "outside"), filepath.Join(ws, "out-dir"))
	if _, err := guard.Writable(ws, "out-dir/deeper/new.txt"); !errors.Is(err, workspace.ErrOutsideWorkspace) {
		t.Errorf("a path through a symlinked directory: %v", err)
	}
	root, _ := filepath.EvalSymlinks(ws)
	for _, good := range []string{"new.txt", "src/new/deep/file.go", "./README.md"} {
		if p, err := guard.Writable(ws, good); err != nil || p != filepath.Join(root, filepath.Clean(good)) {
			t.Errorf("Writable(%q) = %q, %v", good, p, err)
		}
	}
}
