package validate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/purser-dev/purser/internal/procgroup"
	"github.com/purser-dev/purser/sandbox"
)

// A boxed validator runs in a resident box: one box (bwrap and its init)
// per workspace and settings, started once and then asked to run each
// validator (the wire: internal/reswire), so that an iteration pays a fork
// and exec of sh, not bwrap's set-up and a Go start-up (issue 24). Between
// two runs the box's init kills and reaps every process the last one left
// and empties the box's /tmp; a box runs one validator at a time, so
// validators run in parallel get a box each.
//
// An unboxed validator, when Purser supervises its children
// (procgroup.Supervise), runs the same way under a resident supervisor:
// one per workspace and environment (procgroup.StartResident), which runs
// each validator in its own process group and, once it has ended, kills
// and reaps everything it left below the supervisor. Both kinds share the
// pool, the wire and this client.

// idleTimeout is how long a resident box may stay unused before it is
// closed (a variable, so that tests can shorten it).
var idleTimeout = 30 * time.Second

// stopWait is how long a resident box has, after its command was sent
// SIGKILL, to say the command has ended before it is held broken.
const stopWait = 10 * time.Second

// readyWait is how long a new resident box has to be set up.
const readyWait = time.Minute

// errNotSent is a run its box never started (the request could not be
// sent, or the box ended before it started the command): it may run in
// another box.
var errNotSent = errors.New("the validator's resident runner did not start it")

// resident is one resident box.
type resident struct {
	key      string
	kind     string // "box", or "supervisor" (unboxed)
	ws       fileID // the workspace bound in the box, to see it replaced
	cmd      *exec.Cmd
	group    *procgroup.Group
	conn     *net.UnixConn // Purser's end of the box's socket
	lifeline *os.File      // the write end; the box ends when it closes
	said     *lastBytes    // the box's own stderr (bwrap's, the init's)
	waited   chan struct{} // closed once bwrap has been waited for
	broken   atomic.Bool   // not to be used again (set by the goroutine reading a reply too)
	gen      uint64        // counts returns to the idle set, for the idle timer
}

// fileID is a file's identity: a workspace removed and made again at the
// same path is another directory, which a box made before does not see.
type fileID struct{ dev, ino uint64 }

func identify(path string) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileID{}, err
	}
	return fileID{uint64(st.Dev), st.Ino}, nil
}

// startResident starts a resident box for b and waits until it is set up.
func startResident(ctx context.Context, key string, b sandbox.Box) (*resident, error) {
	return startWith(ctx, key, "box", b.Workspace, func(rn *resident, theirs *os.File) error { return rn.start(b, theirs) })
}

// startSupervisor starts a resident supervisor for the unboxed validators
// of workspace and waits until it is set up.
func startSupervisor(ctx context.Context, key, workspace string) (*resident, error) {
	return startWith(ctx, key, "supervisor", workspace, func(rn *resident, theirs *os.File) error {
		cmd, g, err := procgroup.StartResident(theirs, rn.said)
		if err != nil {
			return err
		}
		rn.cmd, rn.group = cmd, g
		go func() {
			_ = cmd.Wait()
			close(rn.waited)
		}()
		return nil
	})
}

// startWith makes the socket pair of a resident runner of kind ("box",
// "supervisor") for workspace, starts it with launch, which serves on
// theirs, and waits until it is set up (or ctx, the validator's, ends).
func startWith(ctx context.Context, key, kind, workspace string, launch func(rn *resident, theirs *os.File) error) (*resident, error) {
	ws, err := identify(workspace)
	if err != nil {
		return nil, fmt.Errorf("the workspace: %w", err)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("the %s's socket: %w", kind, err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), kind+" socket"), os.NewFile(uintptr(fds[1]), kind+" socket")
	defer theirs.Close() // the runner holds it once started
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("the %s's socket: %w", kind, err)
	}
	rn := &resident{key: key, kind: kind, ws: ws, conn: c.(*net.UnixConn), said: &lastBytes{max: 4 << 10},
		waited: make(chan struct{})}
	if err := launch(rn, theirs); err != nil {
		rn.conn.Close()
		return nil, err
	}
	if err := rn.ready(ctx); err != nil {
		rn.close()
		return nil, err
	}
	return rn, nil
}

// start starts bwrap for b, serving on theirs.
func (rn *resident) start(b sandbox.Box, theirs *os.File) error {
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("the box's lifeline: %w", err)
	}
	defer lifeR.Close() // bwrap holds it once started
	b.Lifeline, b.Serve = lifeR, theirs
	cmd, err := b.Command(context.Background(), "")
	if err != nil {
		lifeW.Close()
		return err
	}
	cmd.Stderr = rn.said
	g, err := procgroup.StartContained(cmd)
	if err != nil {
		lifeW.Close()
		return err
	}
	rn.cmd, rn.group, rn.lifeline = cmd, g, lifeW
	go func() {
		_ = cmd.Wait()
		close(rn.waited)
	}()
	return nil
}

// ready waits for the runner to say it is set up, for readyWait at most,
// and no longer than the validator may take: its start counts against the
// validator's timeout, and a cancel ends the wait.
func (rn *resident) ready(ctx context.Context) error {
	deadline := time.Now().Add(readyWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = rn.conn.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = rn.conn.SetReadDeadline(time.Now()) })
	defer func() {
		stop()
		_ = rn.conn.SetReadDeadline(time.Time{})
	}()
	buf := make([]byte, 64)
	n, err := rn.conn.Read(buf)
	if err != nil || string(buf[:n]) != sandbox.ResidentReady {
		return rn.brokeWith("it did not start", err)
	}
	return nil
}

// brokeWith is the error of a runner that broke: what failed, and what it
// said on its way out.
func (rn *resident) brokeWith(what string, err error) error {
	rn.broken.Store(true)
	if rn.kind == "supervisor" && rn.group != nil {
		// A supervisor that died left its command, in a group of its own,
		// to init: it carries the supervisor's mark, which finds it.
		rn.group.End()
		procgroup.KillLeftovers(rn.group.ID())
	}
	msg := "the validator's " + rn.kind + " " + what
	if err != nil {
		msg += ": " + err.Error()
	}
	select {
	case <-rn.waited:
		msg += " (" + rn.cmd.ProcessState.String() + ")"
	case <-time.After(100 * time.Millisecond):
	}
	if s := strings.TrimSpace(rn.said.String()); s != "" {
		msg += "; it said: " + s
	}
	return errors.New(msg)
}

// run runs req (sandbox.ResidentRequest) in the box, its output written to
// out, stopping it when ctx is done: SIGTERM to its process group, then,
// after KillGrace, SIGKILL to every process in the box. It returns the
// command's status as a shell gives it, and whether it was stopped.
func (rn *resident) run(ctx context.Context, req []byte, out io.Writer) (int, bool, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return -1, false, fmt.Errorf("the validator's output: %w", err)
	}
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, pr)
		close(copied)
	}()
	defer func() {
		// The box's init closed its copies once the command and all it
		// left had ended; the bound is for a box that broke meanwhile.
		select {
		case <-copied:
		case <-time.After(5 * time.Second):
		}
		pr.Close()
		<-copied
	}()
	err = rn.send(req, pw)
	pw.Close()
	if err != nil {
		rn.broken.Store(true)
		return -1, false, fmt.Errorf("%w: %w", errNotSent, err)
	}
	replies := make(chan reply, 1)
	go func() { replies <- rn.receive() }()
	select {
	case r := <-replies:
		return r.status, false, r.err
	case <-ctx.Done():
		r := rn.stop(replies)
		return r.status, true, r.err
	}
}

// reply is the box's answer to a run.
type reply struct {
	status int
	err    error
}

// send writes the run request req with the command's stdin (/dev/null),
// stdout and stderr (out, both).
func (rn *resident) send(req []byte, out *os.File) error {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	oob := syscall.UnixRights(int(null.Fd()), int(out.Fd()), int(out.Fd()))
	_, _, err = rn.conn.WriteMsgUnix(req, oob, nil)
	return err
}

// receive reads the box's reply to a run, past the word that the command
// started: a box that ends before that never ran it (errNotSent).
func (rn *resident) receive() reply {
	buf := make([]byte, 64)
	n, err := rn.conn.Read(buf)
	if err == nil && string(buf[:n]) == sandbox.ResidentStarted {
		n, err = rn.conn.Read(buf)
	} else if err == nil && string(buf[:n]) == sandbox.ResidentStale {
		rn.broken.Store(true)
		return reply{-1, fmt.Errorf("%w: its workspace was removed since it was made", errNotSent)}
	} else if err != nil || n == 0 {
		rn.broken.Store(true)
		return reply{-1, fmt.Errorf("%w: it ended (%v)", errNotSent, err)}
	}
	if err != nil || n == 0 {
		return reply{-1, rn.brokeWith("broke while it ran the validator", err)}
	}
	status, discard, err := sandbox.ParseResidentReply(buf[:n])
	if err != nil {
		return reply{-1, rn.brokeWith("replied out of turn", err)}
	}
	if discard {
		rn.broken.Store(true)
	}
	return reply{status: status}
}

// stop stops the running command: SIGTERM to its group, then after
// KillGrace SIGKILL to the box's every process but its init; a box that
// does not answer after that is broken, and closed.
func (rn *resident) stop(replies <-chan reply) reply {
	for _, m := range []struct {
		msg  byte
		wait time.Duration
	}{{sandbox.ResidentTerm, KillGrace}, {sandbox.ResidentKill, stopWait}} {
		if _, err := rn.conn.Write([]byte{m.msg}); err != nil {
			break
		}
		select {
		case r := <-replies:
			return r
		case <-time.After(m.wait):
		}
	}
	rn.broken.Store(true)
	rn.group.End() // kills the box; the pending read returns
	return <-replies
}

// close ends the box — its init ends it at the socket's end of file, and
// at the lifeline's — and waits for bwrap, so that its CPU, and that of all
// it ran, is counted in this process's children's.
func (rn *resident) close() {
	rn.conn.Close()
	if rn.lifeline != nil {
		rn.lifeline.Close()
	}
	if rn.group == nil {
		return
	}
	select {
	case <-rn.waited:
	case <-time.After(2 * time.Second):
		rn.group.End()
		<-rn.waited
	}
	rn.group.End()
}

// alive reports whether bwrap has not exited (as far as its waiting
// goroutine has seen).
func (rn *resident) alive() bool {
	select {
	case <-rn.waited:
		return false
	default:
		return true
	}
}

// pid is bwrap's process id.
func (rn *resident) pid() int { return rn.cmd.Process.Pid }

// lastBytes keeps the last max bytes written to it.
type lastBytes struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (l *lastBytes) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if over := len(l.b) - l.max; over > 0 {
		l.b = append(l.b[:0], l.b[over:]...)
	}
	return len(p), nil
}

func (l *lastBytes) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
