// Package supervisor is the supervisor a child of Purser runs under
// (internal/procgroup starts it): Purser's own binary, exec'd with Arg, a
// child subreaper that kills its child and everything below it when Purser
// is gone. It imports only the standard library packages the runtime
// initialises first, so that its init — which runs the supervisor and
// exits — comes before the rest of the program's initialisation (Go
// initialises packages in the order of their import paths, each once its
// imports are): a supervisor then costs about a spawn, not the whole CLI's
// start-up (issue 24).
package supervisor

import (
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Arg is the hidden first argument that runs a binary as the supervisor of
// one child: `BINARY __purser_supervise FD -- PATH ARGS…`.
const Arg = "__purser_supervise"

// MarkEnv names the variable the supervisor puts in its child's
// environment, "PID START" of the supervisor: every process below it that
// keeps its environment carries it.
const MarkEnv = "PURSER_SUPERVISOR"

// DeathSignal is what the kernel sends the supervisor when the thread of
// Purser that started it dies (Pdeathsig). A signal no agent is sent by
// Purser, so it is never mistaken for a graceful stop.
const DeathSignal = syscall.SIGUSR2

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER (linux/prctl.h),
// which syscall lacks; golang.org/x/sys/unix has it but initialises late
// among the program's packages (see the package comment).
const prSetChildSubreaper = 36

// init runs the supervisor when this binary was started as one, before the
// packages that sort after this one are initialised.
func init() {
	if len(os.Args) > 1 && os.Args[1] == Arg {
		os.Exit(Main(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == ServeArg {
		os.Exit(Serve(os.Args[2:]))
	}
}

// Main is the supervisor: a child subreaper that runs one child
// in its own process group (the group Purser signals) and, when Purser is
// gone, kills the child and every process below it, the ones that left the
// group or the session included — as a subreaper, orphans below it become
// its children instead of init's, so a setsid double fork cannot escape.
// The child's stdin, stdout and stderr are the supervisor's own, passed on
// unchanged: nothing is copied. It returns the child's exit code.
func Main(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintf(os.Stderr, "purser supervisor: want %s FD -- COMMAND [ARG…], got %q\n", Arg, args)
		return 2
	}
	fd, err := strconv.Atoi(args[0])
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "purser supervisor: lifeline %q is not a file descriptor above 2\n", args[0])
		return 2
	}
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0, 0, 0, 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "purser supervisor: becoming a subreaper: %v\n", errno)
		return 2
	}
	parent := os.Getppid()
	// Caught, not ignored: an ignored signal would stay ignored in the
	// child, and the child must get Purser's graceful signal as before.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, DeathSignal)

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

	exited := make(chan syscall.WaitStatus, 1)
	gone := make(chan struct{}) // closed when nothing is left below us
	go reap(child.Pid, exited, gone)
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
			killBelow(gone)
			return exitCode(ws)
		case <-parentGone:
			stopAfterOwner(child.Pid, exited, gone)
			return 137
		case s := <-sigs:
			// The death signal also comes when only Purser's thread that
			// started us ended: then Purser is still our parent.
			if s == DeathSignal && os.Getppid() != parent {
				stopAfterOwner(child.Pid, exited, gone)
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
func stopAfterOwner(child int, exited <-chan syscall.WaitStatus, gone <-chan struct{}) {
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
	killBelow(gone)
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
	for _, part := range bytes.Split([]byte(v), []byte(",")) {
		name, ms, ok := bytes.Cut(bytes.TrimSpace(part), []byte(" "))
		n, err := strconv.Atoi(string(bytes.TrimSpace(ms)))
		if !ok || err != nil || n <= 0 {
			break
		}
		st := graceStep{wait: min(time.Duration(n)*time.Millisecond, maxGrace)}
		switch string(bytes.TrimPrefix(bytes.ToUpper(name), []byte("SIG"))) {
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
// adopted — so none stays a zombie, reports the status of its own, and
// closes gone once it has no child left: as a subreaper, it then has no
// descendant at all, and none can appear.
func reap(pid int, exited chan<- syscall.WaitStatus, gone chan<- struct{}) {
	defer close(gone)
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
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
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		sig := ws.Signal()
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		time.Sleep(100 * time.Millisecond) // a signal we could not die of
		return 128 + int(sig)
	}
	return ws.ExitStatus()
}

// killBelow kills every live process below the supervisor until none is
// left (gone: the reaper found no child left). A process may fork while its
// siblings are being killed, so it repeats; orphans come back to us (we are
// their subreaper), so walking our own tree finds them all, without reading
// the rest of the host's processes. A child that exited alone costs no walk.
func killBelow(gone <-chan struct{}) {
	self := os.Getpid()
	for i := 0; i < 400; i++ {
		select {
		case <-gone:
			return
		default:
		}
		for pid := range Tree(self) {
			if p, ok := Stat(pid); ok && p.State != "Z" {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		select {
		case <-gone:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Tree returns the live descendants of root (pid → start time, as Stat
// reads it), read from /proc/PID/task/TID/children: the processes below
// root only, not every process on the host. Where the kernel has no
// children files (CONFIG_PROC_CHILDREN off) it walks all of /proc instead.
// The children files are a snapshot: a process forked during the read may
// be missed, which is why every caller reads again until nothing is left.
func Tree(root int) map[int]string {
	if !childrenFiles() {
		return Below(root)
	}
	out := map[int]string{}
	queue := childrenOf(root)
	for len(queue) > 0 && len(out) < 1<<16 {
		pid := queue[0]
		queue = queue[1:]
		if _, dup := out[pid]; dup {
			continue
		}
		p, ok := Stat(pid)
		if !ok {
			continue
		}
		out[pid] = p.Start
		queue = append(queue, childrenOf(pid)...)
	}
	return out
}

// childrenOf lists pid's children: those of each of its threads (a child
// is listed under the thread that forked it).
func childrenOf(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range bytes.Fields(b) {
			if c, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

var (
	childrenOnce sync.Once
	haveChildren bool
)

// childrenFiles reports whether this kernel has /proc/PID/task/TID/children.
func childrenFiles() bool {
	childrenOnce.Do(func() {
		pid := strconv.Itoa(os.Getpid())
		_, err := os.Stat("/proc/" + pid + "/task/" + pid + "/children")
		haveChildren = err == nil
	})
	return haveChildren
}

// Below walks all of /proc once and returns root's descendants (pid →
// start time): what Tree falls back to, and what watches a child that runs
// without a supervisor, whose orphans go to init.
func Below(root int) map[int]string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	start := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := Stat(pid); ok {
			parent[pid], start[pid] = p.PPID, p.Start
		}
	}
	out := map[int]string{}
	for pid := range parent {
		for p, hops := parent[pid], 0; p != 0 && hops < 64; p, hops = parent[p], hops+1 {
			if p == root {
				out[pid] = start[pid]
				break
			}
		}
	}
	return out
}

// Process is what /proc/pid/stat says of a process.
type Process struct {
	State string // R, S, D, Z (a zombie: exited, not yet reaped), …
	PPID  int
	PGID  int
	// Start is when it started, in clock ticks since boot: with the pid, it
	// names one process, never a later one that reused the pid.
	Start string
}

// Stat reads /proc/pid/stat; ok is false when the process is gone or its
// stat cannot be read.
func Stat(pid int) (p Process, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Process{}, false
	}
	// The command name is in parentheses and may hold spaces: parse after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Process{}, false
	}
	f := bytes.Fields(b[i+1:]) // state, ppid, pgrp, …, starttime (the 20th)
	if len(f) < 20 {
		return Process{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgid, err2 := strconv.Atoi(string(f[2]))
	if err1 != nil || err2 != nil {
		return Process{}, false
	}
	return Process{State: string(f[0]), PPID: ppid, PGID: pgid, Start: string(f[19])}, true
}
