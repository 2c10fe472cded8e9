package workspace_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser/workspace"
	"github.com/purser-dev/purser/workspace/workspacetest"
)

// Issue 23 #7: a task's own STATUS.<id>.md and BUDGET.<id>.md, written
// when another task sharing the workspace has STATUS.md, are Purser's like
// STATUS.md: no agent writes or deletes them.
func TestWritableRefusesATasksOwnArtifacts(t *testing.T) {
	ws, guard := workspacetest.PursersFiles(t)
	for _, rel := range []string{"STATUS.second-task.md", "BUDGET.second-task.md", "status.x.MD", "BUDGET.a.b.md", "STATUS.x.md/y"} {
		if _, err := guard.Writable(ws, rel); !errors.Is(err, workspace.ErrProtected) {
			t.Errorf("Writable(%q) = %v, want ErrProtected", rel, err)
		}
	}
	for _, rel := range []string{"docs/STATUS.x.md", "STATUS.md.bak", "STATUS.txt", "STATUSES.md", "STATUS..md"} {
		if _, err := guard.Writable(ws, rel); err != nil {
			t.Errorf("Writable(%q) = %v, want it allowed", rel, err)
		}
	}
}

// The first task to write STATUS.md keeps it; another task sharing the
// workspace gets its own names, and keeps them once written.
func TestArtifactsOfSharedWorkspace(t *testing.T) {
	ws := t.TempDir()
	root := workspace.Artifacts{Status: "STATUS.md", Budget: "BUDGET.md"}
	second := workspace.Artifacts{Status: "STATUS.second.md", Budget: "BUDGET.second.md"}
	if got := workspace.ArtifactsOf(ws, "first"); got != root {
		t.Fatalf("empty workspace: %+v, want %+v", got, root)
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("STATUS.md", workspace.StatusHeader+"first\n\n**DONE**\n")
	if got := workspace.ArtifactsOf(ws, "first"); got != root {
		t.Errorf("the owner of STATUS.md: %+v, want %+v", got, root)
	}
	if got := workspace.ArtifactsOf(ws, "second"); got != second {
		t.Errorf("a second task: %+v, want %+v", got, second)
	}
	write("STATUS.second.md", workspace.StatusHeader+"second\n")
	write("STATUS.md", "# my own notes\n") // the user took STATUS.md back
	if got := workspace.ArtifactsOf(ws, "second"); got != second {
		t.Errorf("a task with its own file keeps it: %+v", got)
	}
	if got := workspace.ArtifactsOf(ws, "first"); got != root {
		t.Errorf("a STATUS.md that is no task's: %+v, want %+v", got, root)
	}
}
