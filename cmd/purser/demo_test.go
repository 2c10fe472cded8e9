package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// examples/demo/run.sh leaves nothing behind: its copy of the demo and its
// database go when it ends (not a folder in the temporary directory and a
// project database in the state directory per run), unless PURSER_DEMO_KEEP=1
// keeps the copy, and says where (issue 23 #9).
func TestDemoScriptCleansUp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds purser and runs the demo")
	}
	for _, tool := range []string{"bash", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	// The Go build cache stays the one in use (it is under XDG_CACHE_HOME
	// by default): a cold one would rebuild everything.
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	tmp, state := filepath.Join(root, "tmp"), filepath.Join(root, "state")
	must(t, os.Mkdir(tmp, 0o755))
	run := func(keep string) string {
		cmd := exec.Command("bash", "../../examples/demo/run.sh")
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "XDG_STATE_HOME="+state, "XDG_CACHE_HOME="+filepath.Join(root, "cache"), "GOCACHE="+strings.TrimSpace(string(gocache)), "PURSER_DB=", "PURSER_DEMO_KEEP="+keep)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("run.sh: %v\n%s", err, tail(string(out)))
		}
		if !strings.Contains(string(out), "demo: as intended") {
			t.Fatalf("run.sh did not end as intended:\n%s", tail(string(out)))
		}
		return string(out)
	}
	run("")
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("run.sh left %s in the temporary directory", left[0].Name())
	}
	if _, err := os.Stat(state); err == nil {
		t.Errorf("run.sh left a database in the state directory %s", state)
	}
	out := run("1")
	left, _ := os.ReadDir(tmp)
	if len(left) != 1 || !strings.Contains(out, "files kept in "+filepath.Join(tmp, left[0].Name())) {
		t.Errorf("PURSER_DEMO_KEEP=1: %d folders kept, output:\n%s", len(left), tail(out))
	}
}
