package procgroup_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser/internal/procgroup"
)

// A leader that ignores the signal is killed, with its group, once the
// grace is over; End after that is harmless, and safe to repeat.
func TestStopKillsALeaderThatIgnoresTheSignal(t *testing.T) {
	cmd := exec.Command("sh", "-c", "trap '' TERM; echo trapped; sleep 60 & wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	g, err := procgroup.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	// Under the supervisor sh starts later: wait until its trap is set.
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
		t.Fatalf("leader ended with %v, want killed by SIGKILL", waitErr)
	}
	g.End()
	g.End()
}

// Stat reads a live process's parent, group and start; a process that is
// gone has none.
func TestStatReadsAProcess(t *testing.T) {
	p, ok := procgroup.Stat(os.Getpid())
	if !ok || p.PPID != os.Getppid() || p.PGID != syscall.Getpgrp() || p.State == "Z" || p.Start == "" {
		t.Fatalf("Stat(self) = %+v, %v; want ppid %d, pgid %d", p, ok, os.Getppid(), syscall.Getpgrp())
	}
	again, _ := procgroup.Stat(os.Getpid())
	if again.Start != p.Start {
		t.Fatalf("start changed: %s then %s", p.Start, again.Start)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if p, ok := procgroup.Stat(cmd.Process.Pid); ok {
		t.Fatalf("a reaped process still has a stat: %+v", p)
	}
}
