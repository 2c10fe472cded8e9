//go:build linux

// Package boxinit is the init of a box (pid 1 of its pid namespace, see
// package sandbox): it applies the box's limits, starts the command in its
// own process group, forwards the signals it is sent to that group, reaps
// every orphan in the box, and exits as soon as the command does — which,
// as it is pid 1, makes the kernel kill whatever is left in the box.
//
// It imports only standard library packages the Go runtime initialises
// first, so that its own init — which runs the box's init and exits when
// the box needs no relay (a validator's box: no door, no egress proxy) —
// comes before the rest of the program's initialisation, as the
// supervisor's does (internal/procgroup/supervisor): a box then costs bwrap
// and a Go start-up, not the whole CLI's (issue 24). A box that needs a
// relay is left to package sandbox (sandbox.InitMain), which opens the
// relays with package net and then calls Run.
package boxinit

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/purser-dev/purser/internal/reswire"
)

// Arg is the hidden first argument that makes a binary the box's init:
// `BINARY __purser_box_init door=PORT egress=PORT nproc=N data=BYTES -- NAME ARGS…`.
const Arg = "__purser_box_init"

// The init's own exit statuses, as a shell gives them: the box could not
// run its command, or the command was not found.
const (
	ExitBoxFailed = 125
	ExitNotFound  = 127
)

// ExitTooManyProcesses is the box's status when it was ended for running
// more processes than its limit (see watchProcesses).
const ExitTooManyProcesses = ExitBoxFailed

// init runs the box's init when this binary was started as one and the box
// needs no relay, before the packages that sort after this one are
// initialised. Any other start goes on as usual.
func init() {
	if len(os.Args) < 2 || os.Args[1] != Arg {
		return
	}
	c, err := Parse(os.Args[2:])
	if err != nil || c.Door > 0 || c.Egress > 0 {
		return // sandbox.InitMain says what is wrong, or opens the relays
	}
	os.Exit(Run(c))
}

// Config is what the box's command line tells its init.
type Config struct {
	Door   int // TCP port on the box's 127.0.0.1 relayed to the door's socket; 0: none
	Egress int // TCP port on the box's 127.0.0.1 relayed to the egress proxy; 0: none
	NProc  int
	Data   int64
	// Lifeline is a file descriptor the init reads: at its end of file —
	// Purser closed its end, or died — the box ends. 0: none.
	Lifeline int
	// Serve is a file descriptor of a unix socket on which the init runs
	// one command after another on request (serve.go), the box resident;
	// 0: the box runs Argv once.
	Serve int
	Argv  []string // the command and its arguments; none when serving
}

// Parse reads `door=PORT egress=PORT lifeline=FD serve=FD nproc=N data=BYTES -- NAME ARGS…` as
// package sandbox writes it (a serving box has no command: `serve=FD` and
// nothing after the limits). A negative limit means none.
func Parse(args []string) (Config, error) {
	var c Config
	for i, a := range args {
		if a == "--" {
			c.Argv = args[i+1:]
			if len(c.Argv) == 0 {
				return c, errors.New("no command")
			}
			return c, nil
		}
		k, v := cut(a, '=')
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return c, fmt.Errorf("init argument %q: %w", a, err)
		}
		switch k {
		case "door":
			c.Door = int(n)
		case "egress":
			c.Egress = int(n)
		case "nproc":
			c.NProc = int(n)
		case "data":
			c.Data = n
		case "lifeline", "serve":
			if n < 3 || n > 1<<20 {
				return c, fmt.Errorf("init argument %q: not a file descriptor above 2", a)
			}
			if k == "serve" {
				c.Serve = int(n)
			} else {
				c.Lifeline = int(n)
			}
		default:
			return c, fmt.Errorf("unknown init argument %q", a)
		}
	}
	if c.Serve > 0 {
		return c, nil
	}
	return c, errors.New("no command")
}

// cut is strings.Cut for one byte (package strings initialises late).
func cut(s string, sep byte) (before, after string) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// forwarded are the signals the init passes on to the command's group;
// the others a supervisor sends are SIGKILL (the box ends) and SIGSTOP.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT}

// Run runs this process as the box's init with c, its relays (if any)
// already open, and returns the status to exit with: the command's, or 128
// plus the signal that killed it; ExitBoxFailed when the box could not
// start its command, ExitNotFound when the command is not found.
func Run(c Config) int {
	closeInheritedOnExec()
	if c.Serve > 0 {
		return serve(c)
	}
	path, err := lookPath(c.Argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "purser box: %v\n", err)
		return ExitNotFound
	}
	if c.Lifeline > 0 {
		syscall.CloseOnExec(c.Lifeline) // the box's processes never hold it
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	pid, err := startLimited(c, path, c.Argv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "purser box: starting %s: %v\n", c.Argv[0], err)
		return ExitBoxFailed
	}
	if c.NProc > 0 && os.Getuid() == 0 {
		go watchProcesses(c.NProc)
	}
	if c.Lifeline > 0 {
		go endWithOwner(c.Lifeline, pid)
	}
	go func() {
		for s := range sigs {
			_ = syscall.Kill(-pid, s.(syscall.Signal))
		}
	}()
	status, err := reswire.WaitFor(pid)
	if err != nil {
		fmt.Fprintf(os.Stderr, "purser box: waiting for %s: %v\n", c.Argv[0], err)
		return ExitBoxFailed
	}
	return status
}

// endWithOwner ends the box when the lifeline fd reaches its end of file:
// whoever started the box closed its end, or died (even with SIGKILL, even
// before bwrap had the box set to die with it). The command's group is
// killed, and this init's exit — it is pid 1 — kills the rest of the box.
func endWithOwner(fd, pid int) {
	lifeline := os.NewFile(uintptr(fd), "lifeline")
	var b [1]byte
	_, _ = lifeline.Read(b[:]) // nothing is ever written: it returns at EOF
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	os.Exit(128 + int(syscall.SIGKILL))
}

// lookPath finds name as os/exec's LookPath does, without the package
// (it initialises late): name itself when it holds a slash, else the first
// file in $PATH this process may execute; one found through a relative
// entry of $PATH is refused, as LookPath refuses it (exec.ErrDot).
func lookPath(name string) (string, error) { return lookPathIn(name, os.Getenv("PATH")) }

// lookPathIn is lookPath with path for $PATH.
func lookPathIn(name, path string) (string, error) { return reswire.LookPathIn(name, path) }

// watchProcesses stands in for RLIMIT_NPROC where the kernel does not
// apply it: to a box started by root, whose uid is host root, which the
// kernel exempts (an unprivileged user's box is only ever its own uid, so
// uid 0 inside means root outside). It counts the box's processes — its
// /proc shows no others — and ends the box, every process in it, when they
// are more than max. It polls, so a fork bomb may overshoot for a moment
// before the box ends; the kernel's limit refuses the fork itself.
func watchProcesses(max int) {
	for {
		time.Sleep(processPoll)
		if n := countProcesses(); n > max {
			fmt.Fprintf(os.Stderr, "purser box: %d processes, more than the box's limit of %d: the box is ended\n", n, max)
			os.Exit(ExitTooManyProcesses)
		}
	}
}

// processPoll is how often watchProcesses counts.
const processPoll = 10 * time.Millisecond

// countProcesses counts the processes in /proc.
func countProcesses() int {
	f, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	n := 0
	for _, name := range names {
		if name[0] >= '0' && name[0] <= '9' {
			n++
		}
	}
	return n
}

// closeInheritedOnExec marks every descriptor above stderr close-on-exec:
// a descriptor Purser inherited without the flag (from whatever started
// it) reached the box through bwrap, and would reach the box's commands.
// The init's own are marked already; the commands get stdin, stdout and
// stderr only.
func closeInheritedOnExec() {
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		return
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
