package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser/budget"
)

// Issue 15 #3: a repository (or an agent) plants STATUS.md as a symlink and
// BUDGET.md as a hard link to files outside the workspace. Purser must not
// write through either: the files outside keep their content, the stop
// names both planted links, and both artifacts are still in the database.
func TestArtifactsAreNotWrittenThroughPlantedLinks(t *testing.T) {
	f := newFixture(t, runaway)
	f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("1.0"), MaxIterations: ptr(10)}}
	outside := t.TempDir()
	keys := filepath.Join(outside, "authorized_keys")
	notes := filepath.Join(outside, "notes.txt")
	write(t, keys, "ssh-ed25519 AAAA the user's key\n")
	write(t, notes, "the user's notes\n")
	must(t, os.Symlink(keys, filepath.Join(f.workspace, "STATUS.md")))
	must(t, os.Link(notes, filepath.Join(f.workspace, "BUDGET.md")))

	err := f.run()
	if err == nil {
		t.Fatal("RunTask = nil, want the hard-cap stop")
	}
	if got := readFile(t, keys); got != "ssh-ed25519 AAAA the user's key\n" {
		t.Errorf("STATUS.md was written through its symlink:\n%s", got)
	}
	if got := readFile(t, notes); got != "the user's notes\n" {
		t.Errorf("BUDGET.md was written through its hard link:\n%s", got)
	}
	for _, name := range []string{"STATUS.md", "BUDGET.md"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("the stop does not name the planted %s: %v", name, err)
		}
		art, aerr := f.store.Artifact(context.Background(), f.task.ID, name)
		if aerr != nil || !strings.Contains(string(art), "fix-commas") {
			t.Errorf("artifact %s not in the database: %v", name, aerr)
		}
	}
}
