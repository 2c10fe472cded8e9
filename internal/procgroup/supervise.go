package procgroup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"

	"github.com/purser-dev/purser/internal/procgroup/supervisor"
)

// SupervisorArg is the hidden first argument that runs a binary as the
// supervisor of one child: `BINARY __purser_supervise FD -- PATH ARGS…`.
const SupervisorArg = supervisor.Arg

// MarkEnv names the variable the supervisor puts in its child's
// environment, "PID START" of the supervisor: every process below it that
// keeps its environment carries it.
const MarkEnv = supervisor.MarkEnv

// GraceEnv names the variable, in Purser's environment (which the
// supervisor inherits), that sets how the supervisor stops the child once
// Purser is gone (supervisor.GraceEnv).
const GraceEnv = supervisor.GraceEnv

// DefaultGrace is how the supervisor stops a child whose Purser died, see
// GraceEnv: SIGINT, then SIGKILL for everything left 1 s later.
const DefaultGrace = supervisor.DefaultGrace

var (
	supervisorMu   sync.Mutex
	supervisorSelf string // this binary, when it can supervise; "" otherwise
)

// Supervise must be called first thing in main (and in the TestMain of a
// test binary that runs children through Start). Run as the hidden
// supervisor (os.Args[1] == SupervisorArg), it supervises its child and
// exits. Otherwise it enables supervision: from then on Start runs every
// child under this binary as its supervisor, so that no child outlives
// this process, even one killed with SIGKILL. A binary that never calls it
// starts its children directly, as before.
func Supervise() {
	if len(os.Args) > 1 && os.Args[1] == SupervisorArg {
		os.Exit(supervisor.Main(os.Args[2:]))
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "purser: children run unsupervised: cannot find this executable: %v\n", err)
		return
	}
	supervisorMu.Lock()
	supervisorSelf = self
	supervisorMu.Unlock()
}

// DisableSupervision makes Start run children directly again. Tests use it
// to show what happens without the supervisor.
func DisableSupervision() {
	supervisorMu.Lock()
	supervisorSelf = ""
	supervisorMu.Unlock()
}

func supervisorBinary() string {
	supervisorMu.Lock()
	defer supervisorMu.Unlock()
	return supervisorSelf
}

// wrap rewrites cmd (not started) to run under the supervisor, and returns
// the write end of the lifeline: the supervisor reads the other end, and
// its EOF — this process closed it, or died — makes it kill its child and
// everything below it. It returns nil when supervision is off.
func wrap(cmd *exec.Cmd) (*os.File, error) {
	self := supervisorBinary()
	if self == "" {
		return nil, nil
	}
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("supervisor lifeline: %w", err)
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, lifeR)
	fd := 2 + len(cmd.ExtraFiles)
	args := append([]string{self, SupervisorArg, strconv.Itoa(fd), "--", cmd.Path}, cmd.Args[1:]...)
	cmd.Path, cmd.Args = self, args
	cmd.SysProcAttr.Pdeathsig = supervisor.DeathSignal
	return lifeW, nil
}

// startLocked starts cmd with the calling goroutine locked to its OS
// thread: Pdeathsig fires when the thread that forked the child exits, not
// the process (golang/go#27505), and a locked thread is not retired under
// us while Start runs; once unlocked it returns to the runtime's pool,
// which keeps idle threads alive.
func startLocked(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Start()
}

// ErrUnsupervised is StartResident's error when Supervise has not enabled
// supervision: there is no binary to run as the supervisor.
var ErrUnsupervised = errors.New("procgroup: supervision is off")

// StartResident starts this binary as a resident supervisor
// (supervisor.ServeArg) serving on sock, the supervisor's end of a
// SOCK_SEQPACKET socket pair, which the caller closes once this returns;
// the supervisor's own messages go to stderr. It returns the started
// command, for the caller to wait for, and its Group, which holds the
// supervisor's lifeline: ending the Group — or this process dying, even by
// SIGKILL — ends the supervisor and everything below it.
func StartResident(sock *os.File, stderr io.Writer) (*exec.Cmd, *Group, error) {
	self := supervisorBinary()
	if self == "" {
		return nil, nil, ErrUnsupervised
	}
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("supervisor lifeline: %w", err)
	}
	defer lifeR.Close() // the supervisor holds it once started
	cmd := exec.Command(self, supervisor.ServeArg, "3", "4")
	cmd.ExtraFiles = []*os.File{lifeR, sock}
	cmd.Stderr = stderr
	prepare(cmd)
	cmd.SysProcAttr.Pdeathsig = supervisor.DeathSignal
	if err := startLocked(cmd); err != nil {
		lifeW.Close()
		return nil, nil, fmt.Errorf("starting the resident supervisor: %w", err)
	}
	return cmd, started(cmd, lifeW, false, true), nil
}

// Supervised reports whether Supervise has enabled supervision (and
// DisableSupervision has not turned it off since).
func Supervised() bool { return supervisorBinary() != "" }
