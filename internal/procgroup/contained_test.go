package procgroup_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser/internal/procgroup"
	"github.com/purser-dev/purser/internal/proctest"
)

// A contained child (a box, which holds its own processes) is started
// itself, with no supervisor in front even with supervision on (this test
// binary's TestMain enables it), leads its own group, and is killed at
// once when stopped (bwrap forwards no signal: a box has no
// graceful stop), with what it started.
func TestStartContainedStartsNoSupervisor(t *testing.T) {
	arg := proctest.UniqueArg()
	cmd := exec.Command("sh", "-c", "trap '' TERM; echo trapped; sleep "+arg+" & wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	g, err := procgroup.StartContained(cmd)
	if err != nil {
		t.Fatal(err)
	}
	argv, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline")
	if bytes.Contains(argv, []byte(procgroup.SupervisorArg)) || g.PGID() != cmd.Process.Pid {
		t.Errorf("started %q leading group %d, want sh itself leading its own group", bytes.ReplaceAll(argv, []byte{0}, []byte(" ")), g.PGID())
	}
	if p, ok := procgroup.Stat(cmd.Process.Pid); !ok || p.PGID != cmd.Process.Pid {
		t.Errorf("the child's group is %+v, want its own", p)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("sh did not say its trap is set: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	begun := time.Now()
	g.Stop(syscall.SIGTERM, 30*time.Second, exited) // sh ignores SIGTERM
	if took := time.Since(begun); took > 10*time.Second {
		t.Errorf("Stop took %s: it waited for a grace a box cannot use", took)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the group outlived Stop")
	}
	// Killed from below (its sleep first), sh may end by itself before
	// its own SIGKILL: either way it ended long before a trapped SIGTERM
	// would have let it, and nothing it started is left.
	if waitErr == nil && !cmd.ProcessState.Exited() {
		t.Fatalf("the child's end is unknown: %v", cmd.ProcessState)
	}
	// SIGKILLed, the sleep may still be listed for a moment on a loaded
	// machine: it must be gone soon, not at once.
	for end := time.Now().Add(5 * time.Second); proctest.FindProcess(arg) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Errorf("the child's sleep (pid %d) outlived Stop", proctest.FindProcess(arg))
			break
		}
	}
	g.End()
}
