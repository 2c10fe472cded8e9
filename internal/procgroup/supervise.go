package procgroup

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SupervisorArg is the hidden first argument that runs a binary as the
// supervisor of one child: `BINARY __purser_supervise FD -- PATH ARGS…`.
const SupervisorArg = "__purser_supervise"

// MarkEnv names the variable the supervisor puts in its child's
// environment, "PID START" of the supervisor: every process below it that
// keeps its environment carries it.
const MarkEnv = "PURSER_SUPERVISOR"

// deathSignal is what the kernel sends the supervisor when the thread of
// Purser that started it dies (Pdeathsig). A signal no agent is sent by
// Purser, so it is never mistaken for a graceful stop.
const deathSignal = syscall.SIGUSR2

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
		os.Exit(superviseMain(os.Args[2:]))
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
	cmd.SysProcAttr.Pdeathsig = deathSignal
	return lifeW, nil
}

// superviseMain is the supervisor: a child subreaper that runs one child
// in its own process group (the group Purser signals) and, when Purser is
// gone, kills the child and every process below it, the ones that left the
// group or the session included — as a subreaper, orphans below it become
// its children instead of init's, so a setsid double fork cannot escape.
// The child's stdin, stdout and stderr are the supervisor's own, passed on
// unchanged: nothing is copied. It returns the child's exit code.
func superviseMain(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintf(os.Stderr, "purser supervisor: want %s FD -- COMMAND [ARG…], got %q\n", SupervisorArg, args)
		return 2
	}
	fd, err := strconv.Atoi(args[0])
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "purser supervisor: lifeline %q is not a file descriptor above 2\n", args[0])
		return 2
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "purser supervisor: becoming a subreaper: %v\n", err)
		return 2
	}
	parent := os.Getppid()
	// Caught, not ignored: an ignored signal would stay ignored in the
	// child, and the child must get Purser's graceful signal as before.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, deathSignal)

	lifeline := os.NewFile(uintptr(fd), "lifeline")
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	for i := 3; i < fd; i++ {
		files = append(files, os.NewFile(uintptr(i), "extra"))
	}
	// The mark lets a later Purser find what is left of this call even if
	// this supervisor was itself killed (KillLeftovers).
	self, _ := Stat(os.Getpid())
	env := append(os.Environ(), MarkEnv+"="+strconv.Itoa(os.Getpid())+" "+self.Start)
	child, err := os.StartProcess(args[2], args[2:], &os.ProcAttr{Env: env, Files: files})
	if err != nil {
		fmt.Fprintf(os.Stderr, "purser supervisor: start %s: %v\n", args[2], err)
		return 127
	}
	for _, f := range files[3:] {
		f.Close()
	}

	exited := make(chan unix.WaitStatus, 1)
	go reap(child.Pid, exited)
	parentGone := make(chan struct{})
	go func() {
		// Nothing is ever written: the read returns at EOF, when Purser
		// closed its end or died.
		var b [1]byte
		_, _ = lifeline.Read(b[:])
		close(parentGone)
	}()

	for {
		select {
		case ws := <-exited:
			// Tools the child left running go with it.
			killBelow(os.Getpid())
			return exitCode(ws)
		case <-parentGone:
			stopAfterOwner(child.Pid, exited)
			return 137
		case s := <-sigs:
			// The death signal also comes when only Purser's thread that
			// started us ended: then Purser is still our parent.
			if s == deathSignal && os.Getppid() != parent {
				stopAfterOwner(child.Pid, exited)
				return 137
			}
			// Other signals reached the child too (same group): it decides.
		}
	}
}

// GraceEnv names the variable, in Purser's environment (which the
// supervisor inherits), that sets how the supervisor stops the child once
// Purser is gone: steps "SIGNAL MILLISECONDS" separated by commas, each
// sending the child the signal (NONE: no signal) and waiting that long for
// it to exit, e.g. "INT 1000" or "NONE 300, INT 700"; "KILL" for no grace.
// Unset: DefaultGrace. Whatever is left after the steps is killed.
const GraceEnv = "PURSER_SUPERVISOR_GRACE"

// DefaultGrace is how the supervisor stops a child whose Purser died, see
// GraceEnv: SIGINT, which each agent CLI takes as "stop" (Codex writes the
// usage of the reply it holds to its rollout only then; with SIGTERM or
// SIGKILL it is lost: docs/reliability.md), and SIGKILL for everything
// left 1 s later.
const DefaultGrace = "INT 1000"

// stopAfterOwner ends the child and everything below it once Purser is
// gone. With a grace (GraceEnv), the child is first given the grace's steps
// to exit by itself — time for an agent CLI to write the reply it already
// received to its session file, from which the resume recovers the spend —
// and is killed with everything below it after.
func stopAfterOwner(child int, exited <-chan unix.WaitStatus) {
	deadline := time.Now().Add(maxGrace)
steps:
	for _, st := range graceOf(os.Getenv(GraceEnv)) {
		if st.sig != 0 {
			_ = syscall.Kill(child, st.sig)
		}
		select {
		case <-exited:
			break steps
		case <-time.After(min(st.wait, time.Until(deadline))):
		}
	}
	killBelow(os.Getpid())
}

// maxGrace bounds the grace: an agent must never outlive Purser by more
// than a moment.
const maxGrace = time.Second

type graceStep struct {
	sig  syscall.Signal // 0: none
	wait time.Duration
}

// graceOf reads GraceEnv's value; a step it cannot read ends the grace
// there.
func graceOf(v string) []graceStep {
	if v == "" {
		v = DefaultGrace
	}
	var steps []graceStep
	for _, part := range strings.Split(v, ",") {
		name, ms, ok := strings.Cut(strings.TrimSpace(part), " ")
		n, err := strconv.Atoi(strings.TrimSpace(ms))
		if !ok || err != nil || n <= 0 {
			break
		}
		st := graceStep{wait: min(time.Duration(n)*time.Millisecond, maxGrace)}
		switch strings.TrimPrefix(strings.ToUpper(name), "SIG") {
		case "NONE":
		case "TERM":
			st.sig = syscall.SIGTERM
		case "INT":
			st.sig = syscall.SIGINT
		default:
			return steps
		}
		steps = append(steps, st)
	}
	return steps
}

// reap waits for every child of the supervisor — its own and the orphans it
// adopted — so none stays a zombie, and reports the status of its own.
func reap(pid int, exited chan<- unix.WaitStatus) {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return // ECHILD: nothing left below us
		}
		if got == pid {
			exited <- ws
		}
	}
}

// exitCode is the supervisor's exit for the child's status: the same code,
// or the same signal, so that Purser sees the child's own end.
func exitCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		sig := ws.Signal()
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		time.Sleep(100 * time.Millisecond) // a signal we could not die of
		return 128 + int(sig)
	}
	return ws.ExitStatus()
}

// killBelow kills every live process below root until none is left: a
// process may fork while its siblings are being killed, so it repeats.
func killBelow(root int) {
	for i := 0; i < 200; i++ {
		d := newDescendants(root)
		d.scan()
		live := 0
		d.mu.Lock()
		for pid := range d.seen {
			if p, ok := Stat(pid); ok && p.State != "Z" {
				live++
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		d.mu.Unlock()
		if live == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
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
