package procgroup_test

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser/internal/procgroup"
)

// A contained child (a box, which holds its own processes) is started
// itself, with no supervisor in front even with supervision on (this test
// binary's TestMain enables it), leads its own group, and is stopped and
// ended like any group: killed once the grace is over.
func TestStartContainedStartsNoSupervisor(t *testing.T) {
	cmd := exec.Command("sh", "-c", "trap '' TERM; echo trapped; sleep 6401 & wait")
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
	g.Stop(syscall.SIGTERM, 200*time.Millisecond, exited)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the group outlived Stop")
	}
	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child ended with %v, want killed by SIGKILL", waitErr)
	}
	g.End()
}
