package supervisor_test

import (
	"bufio"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser/internal/procgroup/supervisor"
)

// Tree finds a process's descendants from the children files, grandchildren
// included, and agrees with the walk of all of /proc it replaces.
func TestTreeFindsDescendants(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sh -c 'sleep 30' & sleep 30 & echo started; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for pid := range supervisor.Below(cmd.Process.Pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	// sh, sleep, and the inner sh's sleep (unless that sh exec'd it).
	var tree map[int]string
	for i := 0; i < 200; i++ {
		if tree = supervisor.Tree(cmd.Process.Pid); len(tree) >= 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	below := supervisor.Below(cmd.Process.Pid)
	if len(tree) < 2 || len(tree) != len(below) {
		t.Fatalf("Tree = %v, the walk of /proc = %v", tree, below)
	}
	for pid, start := range below {
		if tree[pid] != start {
			t.Errorf("pid %d: Tree says start %q, the walk %q", pid, tree[pid], start)
		}
	}
}
