package sandbox

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// IsInit reports whether this process was started as a box's init. A
// program that runs boxes calls it first thing in main (a test binary in
// TestMain) and, when it holds, calls InitMain and nothing else.
func IsInit() bool { return len(os.Args) > 1 && os.Args[1] == initArg }

// InitMain runs this process as the box's init and exits with the status
// of the command it runs: it opens the door relay, applies the limits,
// starts the command in its own process group, forwards the signals it is
// sent to that group, reaps every orphan in the box, and exits as soon as
// the command does — which, as it is pid 1 of the box's pid namespace,
// makes the kernel kill whatever is left in the box. A command killed by a
// signal gives 128 plus its number; a box that could not start its command
// exits 125, or 127 when the command is not found.
func InitMain() { os.Exit(initMain(os.Args[2:])) }

// initConfig is what Command tells the init on its command line.
type initConfig struct {
	door   int // TCP port on the box's 127.0.0.1 relayed to doorSocket; 0: none
	egress int // TCP port on the box's 127.0.0.1 relayed to the egress proxy; 0: none
	nproc  int
	data   int64
	argv   []string // the command and its arguments
}

// parseInitArgs reads `door=PORT egress=PORT nproc=N data=BYTES -- NAME ARGS…` as
// bwrapArgs writes it. A negative limit means none.
func parseInitArgs(args []string) (initConfig, error) {
	var c initConfig
	for i, a := range args {
		if a == "--" {
			c.argv = args[i+1:]
			if len(c.argv) == 0 {
				return c, errors.New("no command")
			}
			return c, nil
		}
		k, v, _ := strings.Cut(a, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return c, fmt.Errorf("init argument %q: %w", a, err)
		}
		switch k {
		case "door":
			c.door = int(n)
		case "egress":
			c.egress = int(n)
		case "nproc":
			c.nproc = int(n)
		case "data":
			c.data = n
		default:
			return c, fmt.Errorf("unknown init argument %q", a)
		}
	}
	return c, errors.New("no command")
}

// The init's own exit statuses, as a shell gives them: the box could not
// run its command, or the command was not found.
const (
	exitBoxFailed = 125
	exitNotFound  = 127
)

// forwarded are the signals the init passes on to the command's group;
// the others a supervisor sends are SIGKILL (the box ends) and SIGSTOP.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT}

// initMain is InitMain, returning the status to exit with.
func initMain(args []string) int {
	c, err := parseInitArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "purser box: %v\n", err)
		return exitBoxFailed
	}
	for _, r := range []struct {
		port       int
		path, what string
	}{{c.door, doorSocket, "the door"}, {c.egress, egressSock, "the egress proxy"}} {
		if r.port <= 0 {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)))
		if err != nil {
			fmt.Fprintf(os.Stderr, "purser box: opening %s: %v\n", r.what, err)
			return exitBoxFailed
		}
		go serveRelay(ln, r.path, r.what)
	}
	path, err := exec.LookPath(c.argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "purser box: %v\n", err)
		return exitNotFound
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	pid, err := startLimited(c, path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "purser box: starting %s: %v\n", c.argv[0], err)
		return exitBoxFailed
	}
	if c.nproc > 0 && os.Getuid() == 0 {
		go watchProcesses(c.nproc)
	}
	go func() {
		for s := range sigs {
			_ = syscall.Kill(-pid, s.(syscall.Signal))
		}
	}()
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "purser box: waiting for %s: %v\n", c.argv[0], err)
			return exitBoxFailed
		}
		if got != pid {
			continue // an orphan reparented to us: reaped, nothing more
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}

// startLimited applies the box's limits and starts the command in its own
// process group (the one the init signals). The limits are set, soft and
// hard, on the init itself, and the command inherits them from the fork
// on: lowering them only around the fork would need raising the hard
// limits again, which a box without capabilities cannot, and leaving the
// hard ones high would let the command raise its own. The init needs
// little: its threads are made before the command starts.
//
// A race-detector build (tests only) cannot run under RLIMIT_DATA, so
// there the command's memory bound is set just after it starts, which a
// command quick to fork could outrun; every other build does as above.
func startLimited(c initConfig, path string) (int, error) {
	limits := []struct {
		res int
		v   int64
	}{{unix.RLIMIT_NPROC, int64(c.nproc)}, {unix.RLIMIT_DATA, c.data}}
	var after []unix.Rlimit // raceBuild: RLIMIT_DATA, set on the child
	for _, l := range limits {
		if l.v < 0 {
			continue
		}
		r := unix.Rlimit{Cur: uint64(l.v), Max: uint64(l.v)}
		if raceBuild && l.res == unix.RLIMIT_DATA {
			after = append(after, r)
			continue
		}
		if err := unix.Setrlimit(l.res, &r); err != nil {
			return 0, fmt.Errorf("setting limit %d to %d: %w", l.res, l.v, err)
		}
	}
	p, err := os.StartProcess(path, c.argv, &os.ProcAttr{
		Env:   os.Environ(),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return 0, err
	}
	pid := p.Pid
	_ = p.Release() // reaped by the wait4 loop, not by os.Process
	for i := range after {
		if err := unix.Prlimit(pid, unix.RLIMIT_DATA, &after[i], nil); err != nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			return 0, fmt.Errorf("bounding the command's memory: %w", err)
		}
	}
	return pid, nil
}

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
			os.Exit(exitTooManyProcesses)
		}
	}
}

// processPoll is how often watchProcesses counts.
const processPoll = 10 * time.Millisecond

// exitTooManyProcesses is the box's status when watchProcesses ended it.
const exitTooManyProcesses = exitBoxFailed

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

// serveRelay relays each connection to ln to the unix socket at path (the
// door's, or the egress proxy's: what), both ways, until either side
// closes.
func serveRelay(ln net.Listener, path, what string) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("unix", path)
			if err != nil {
				// Said once per connection, on the boxed program's stderr,
				// which Purser keeps: a closed door is Purser's fault to find.
				fmt.Fprintf(os.Stderr, "purser box: %s is closed: %v\n", what, err)
				return
			}
			defer out.Close()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(out, in)
				_ = out.(*net.UnixConn).CloseWrite()
				close(done)
			}()
			_, _ = io.Copy(in, out)
			_ = in.(*net.TCPConn).CloseWrite()
			<-done
		}()
	}
}
