package procgroup_test

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser/internal/procgroup"
)

// A leader that ignores the signal is killed, with its group, once the
// grace is over; End after that is harmless, and safe to repeat.
func TestStopKillsALeaderThatIgnoresTheSignal(t *testing.T) {
	cmd := exec.Command("sh", "-c", "trap '' TERM; sleep 60 & wait")
	g, err := procgroup.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	time.Sleep(100 * time.Millisecond) // let sh set its trap
	g.Stop(syscall.SIGTERM, 200*time.Millisecond, exited)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the group outlived Stop")
	}
	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("leader ended with %v, want killed by SIGKILL", waitErr)
	}
	g.End()
	g.End()
}
