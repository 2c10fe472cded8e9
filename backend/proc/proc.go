// Package proc runs an agent CLI as a child in its own process group, reads
// its output line by line as it comes, and stops it the way Purser stops
// every agent: a graceful signal first (the one that still yields usage),
// then the whole group killed after a grace period.
package proc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/purser-dev/purser/internal/procgroup"
	"github.com/purser-dev/purser/redact"
	"github.com/purser-dev/purser/sandbox"
)

// MaxLine is the longest output line passed on; a longer one is dropped as
// garbage.
const MaxLine = 16 << 20

// Command is a child to run.
type Command struct {
	Path  string
	Args  []string
	Dir   string
	Env   []string
	Stdin io.Reader
	// Interrupt is the signal sent to the group when ctx is done;
	// SIGINT when zero.
	Interrupt syscall.Signal
	// Grace is how long the group has after Interrupt before SIGKILL.
	Grace time.Duration
	// Stall, when positive, ends the child as stalled once this long has
	// passed without a byte on its stdout or stderr and without a change of
	// Progress: a hung request is given up long before the call's timeout.
	Stall time.Duration
	// Progress, when set, is polled by the stall detector; a new value is
	// work by the agent that its output does not show, such as its session
	// file growing (Follower.Offset).
	Progress func() int64
	// Started, when set, is given the ID of the child's process group as
	// soon as it runs (CallRequest.Hooks.Started): recorded with the call,
	// so that a resume after Purser's death can make sure nothing of it
	// still runs.
	Started func(process string)
	// Box says Path is bwrap running the command in a box (CLIOptions'
	// sandbox): a graceful stop goes to the box's init, which forwards it
	// to the command (bwrap forwards no signal); the hard stop kills the
	// group, bwrap with it, and with bwrap the whole box.
	Box bool
	// Files are host files the command names (a settings file Purser
	// wrote for it), which a box shows read-only at their path.
	Files []string
}

// Outcome is how the child ended.
type Outcome struct {
	WaitErr error
	Stderr  string // the last 16 KiB
	Stopped bool   // ctx was done: the child was interrupted, then killed
	// Stalled: nothing came for Command.Stall, and the child was
	// interrupted, then killed (Stall says so as an error).
	Stalled bool
	stall   time.Duration
}

// Run starts c and calls onLine for each line of its stdout until it exits.
// When ctx is done the group is interrupted, then killed after c.Grace.
// Whatever of the group is left when the child exits is killed too.
func Run(ctx context.Context, c Command, onLine func([]byte)) (Outcome, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir, cmd.Env, cmd.Stdin = c.Dir, c.Env, c.Stdin
	// Our own pipes: Wait then returns when the child exits, even if a
	// process that escaped its group still holds them open.
	outR, outW, err := os.Pipe()
	if err != nil {
		return Outcome{}, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return Outcome{}, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var activity atomic.Int64 // bytes read from the child, for the stall detector
	group, err := procgroup.Start(cmd)
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return Outcome{}, fmt.Errorf("start %s: %w", c.Path, err)
	}
	if c.Started != nil {
		c.Started(group.ID())
	}
	sig := c.Interrupt
	if sig == 0 {
		sig = syscall.SIGINT
	}

	var stderr tail
	linesDone, stderrDone := readOutput(outR, errR, &activity, &stderr, onLine)

	var out Outcome
	var mu sync.Mutex
	exited := make(chan struct{})
	stalled := make(chan struct{})
	if c.Stall > 0 {
		go watchStall(c.Stall, &activity, c.Progress, exited, stalled)
	}
	stop := func() {
		if !c.Box {
			group.Stop(sig, c.Grace, exited)
			return
		}
		if sandbox.SignalUnder(cmd.Process.Pid, sig) == nil {
			timer := time.NewTimer(c.Grace)
			defer timer.Stop()
			select {
			case <-exited:
				return
			case <-timer.C:
			}
		}
		// The hard stop: bwrap killed, its init dies with it (the
		// parent-death signal), and with the init, as pid 1 of the
		// box's namespace, every process in the box.
		group.Stop(syscall.SIGKILL, 0, exited)
	}
	go func() {
		select {
		case <-ctx.Done():
			mu.Lock()
			out.Stopped = true
			mu.Unlock()
			stop()
		case <-stalled:
			mu.Lock()
			out.Stalled, out.stall = true, c.Stall
			mu.Unlock()
			stop()
		case <-exited:
		}
	}()
	waitErr := cmd.Wait()
	close(exited)
	// Tools the agent left running go with it: its group, and descendants
	// that left the group (setsid) while it ran.
	group.End()
	drain(linesDone, outR)
	drain(stderrDone, errR)
	mu.Lock()
	defer mu.Unlock()
	out.WaitErr, out.Stderr = waitErr, stderr.String()
	return out, nil
}

// readOutput reads the child's stdout line by line into onLine and its
// stderr into stderr, counting the bytes as activity for the stall
// detector; each returned channel is closed when its pipe is read to its
// end.
func readOutput(outR, errR *os.File, activity *atomic.Int64, stderr *tail, onLine func([]byte)) (linesDone, stderrDone <-chan struct{}) {
	errDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(countingWriter{stderr, activity}, errR)
		close(errDone)
	}()
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		r := bufio.NewReaderSize(countingReader{outR, activity}, 64<<10)
		for {
			line, err := ReadLine(r)
			if len(line) > 0 {
				onLine(line)
			}
			if err != nil {
				return
			}
		}
	}()
	return outDone, errDone
}

// drain waits for a pipe to be read to its end, unless something we could
// not kill still holds it: then it is cut off after a second.
func drain(done <-chan struct{}, r *os.File) {
	select {
	case <-done:
	case <-time.After(time.Second):
		r.Close()
		<-done
	}
	r.Close()
}

// KillAll kills every child Purser runs (agents and validators), with its
// group and every descendant seen, at once. Purser calls it when it must quit
// without the graceful stop (a second signal), so that no agent outlives it.
func KillAll() { procgroup.KillAll() }

// ReadLine reads one line of any length; a line longer than MaxLine comes
// back empty.
func ReadLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, isPrefix, err := r.ReadLine()
		if !tooLong && len(line)+len(chunk) <= MaxLine {
			line = append(line, chunk...)
		} else {
			tooLong, line = true, nil
		}
		if err != nil || !isPrefix {
			return line, err
		}
	}
}

// tail keeps the last 16 KiB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
	// cut says the start of what was written is gone: the first word kept
	// may be the end of a secret whose prefix no rule can match any more.
	cut bool
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - 16<<10; over > 0 {
		t.buf, t.cut = t.buf[over:], true
	}
	return len(p), nil
}

// String is what was kept, secrets masked and the word the cut fell inside
// dropped.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return redact.Tail(string(t.buf), 16<<10, t.cut)
}

// LastLines returns the last n lines of s on one line, secrets masked: it
// is how an agent's stderr gets into an error.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return redact.String(strings.Join(lines, " | "))
}
