package exec_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
)

// The helper process of TestKilledCallsFolderIsRemovedByTheNextCall: a
// Purser whose call is in flight when it is killed.
func TestHelperKilledMidCall(t *testing.T) {
	marker := os.Getenv("PURSER_EXEC_HELPER_MARKER")
	if marker == "" {
		t.Skip("a helper process only")
	}
	// The agent says where its files are, then waits (bounded) until its
	// folder is gone: it outlives the Purser killed under it.
	b, ws := agent(t, `echo "$PURSER_USAGE_FILE" > `+marker+`.tmp && mv `+marker+`.tmp `+marker+`
i=0; while [ -e "$PURSER_USAGE_FILE" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done`)
	_, _ = b.Call(context.Background(), purser.CallRequest{Workspace: ws, Prompt: "p"}, func(budget.UsageEvent) {})
}

// A Purser killed mid-call cannot remove its call's folder; the next call,
// in another Purser, does, and leaves a live Purser's folder alone.
func TestKilledCallsFolderIsRemovedByTheNextCall(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	marker := filepath.Join(t.TempDir(), "usage-file")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperKilledMidCall$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PURSER_EXEC_HELPER_MARKER="+marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var usageFile string
	for deadline := time.Now().Add(60 * time.Second); usageFile == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(marker)
		usageFile = strings.TrimSpace(string(b))
	}
	if usageFile == "" {
		cmd.Process.Kill()
		t.Fatal("the helper's call never started")
	}
	killed := filepath.Dir(usageFile)
	if filepath.Dir(killed) != tmp {
		cmd.Process.Kill()
		t.Fatalf("the call's folder %s is not in the temporary directory %s", killed, tmp)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := os.Stat(killed); err != nil {
		t.Fatalf("the killed call's folder is already gone (%v): the test proves nothing", err)
	}

	// A folder of a live Purser (this one), and one of an older Purser
	// with no owner file: neither is touched.
	live := filepath.Join(tmp, "purser-exec-live")
	old := filepath.Join(tmp, "purser-exec-old")
	for _, d := range []string{live, old} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(live, "owner"), []byte(proc.Owners{}.Self()), 0o600); err != nil {
		t.Fatal(err)
	}

	b, ws := agent(t, "true")
	if _, err := b.Call(context.Background(), purser.CallRequest{Workspace: ws, Prompt: "p"}, func(budget.UsageEvent) {}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(killed); !os.IsNotExist(err) {
		t.Errorf("the killed call's folder %s is still there after the next call (%v)", killed, err)
	}
	for _, d := range []string{live, old} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "purser-exec-*"))
	if len(left) != 2 {
		t.Errorf("folders left: %v, want only the live and the old one", left)
	}
}
