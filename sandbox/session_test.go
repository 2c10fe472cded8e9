//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Started from a terminal, the box is not in the terminal's session: it
// has no controlling terminal, so it cannot push keystrokes into the
// user's shell (TIOCSTI) even with the terminal open on its stdin.
func TestBoxHasNoControllingTerminal(t *testing.T) {
	w := newWorld(t)
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal to start the box from: %v", err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	go func() { _, _ = bytes.NewBuffer(nil).ReadFrom(ptmx) }() // drain the terminal

	cmd, err := w.box.Command(context.Background(), "sh", "-c", "cat /proc/self/stat > stat; sleep 1")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The box's own process (bwrap) has the terminal: the set-up holds.
	outer := statField(t, "/proc/"+strconv.Itoa(cmd.Process.Pid)+"/stat", 4)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if outer == "0" {
		t.Fatal("the box was not started with a controlling terminal: the test proves nothing")
	}
	if inner := statField(t, w.box.Workspace+"/stat", 4); inner != "0" {
		t.Errorf("the box's process has controlling terminal %s (its starter's is %s)", inner, outer)
	}
}

// statField returns field i (0 is the state) after the command name of a
// /proc/PID/stat file; field 4 is tty_nr.
func statField(t *testing.T, path string, i int) string {
	t.Helper()
	var b []byte
	var err error
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if b, err = os.ReadFile(path); err == nil && len(b) > 0 {
			break
		}
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) <= i {
		t.Fatalf("%s: %q, %v", path, s, err)
	}
	return f[i]
}
