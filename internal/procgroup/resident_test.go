package procgroup_test

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser/internal/procgroup"
	"github.com/purser-dev/purser/internal/proctest"
	"github.com/purser-dev/purser/internal/reswire"
)

// startResident starts a resident supervisor and returns Purser's end of
// its socket, once it has said it is ready.
func startResident(t *testing.T) (*net.UnixConn, *procgroup.Group) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
	cmd, g, err := procgroup.StartResident(theirs, os.Stderr)
	theirs.Close()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	t.Cleanup(g.End)
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		t.Fatal(err)
	}
	conn := c.(*net.UnixConn)
	if got := read(t, conn); got != reswire.MsgReady {
		t.Fatalf("the resident supervisor said %q, want %q", got, reswire.MsgReady)
	}
	return conn, g
}

func read(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(buf[:n])
}

// Quitting at once (KillAll) while a resident supervisor runs a command
// ends the command, what it left, and the supervisor, without the
// supervisor reporting the command's death as a run that ended: Purser
// must not carry on as if its validator had run (cmd/purser's second
// signal).
func TestKillAllEndsAResidentSupervisorWithoutAReply(t *testing.T) {
	conn, _ := startResident(t)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	req, err := reswire.Request(t.TempDir(), []string{"sh", "-c", "setsid sleep 6471 & sleep 6472"}, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	fd := int(null.Fd())
	if _, _, err := conn.WriteMsgUnix(req, syscall.UnixRights(fd, fd, fd), nil); err != nil {
		t.Fatal(err)
	}
	if got := read(t, conn); got != reswire.MsgStarted {
		t.Fatalf("the resident supervisor said %q, want %q", got, reswire.MsgStarted)
	}
	for end := time.Now().Add(10 * time.Second); proctest.FindProcess("6471") == 0 || proctest.FindProcess("6472") == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the command did not start in 10 s")
		}
	}
	procgroup.KillAll()
	if got := read(t, conn); got != "error: EOF" {
		t.Fatalf("after KillAll the resident supervisor said %q, want the socket's end", got)
	}
	for _, arg := range []string{"6471", "6472"} {
		if pid := proctest.FindProcess(arg); pid != 0 && proctest.Alive(pid) {
			t.Errorf("sleep %s (pid %d) outlived KillAll", arg, pid)
		}
	}
}

// Without supervision there is no resident supervisor to start.
func TestStartResidentNeedsSupervision(t *testing.T) {
	procgroup.DisableSupervision()
	defer procgroup.Supervise()
	if _, _, err := procgroup.StartResident(nil, nil); !errors.Is(err, procgroup.ErrUnsupervised) {
		t.Fatalf("StartResident without supervision: %v", err)
	}
}
