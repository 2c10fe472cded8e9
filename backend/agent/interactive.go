package agent

import (
	"context"
	"errors"
	"io"
	"os"
	osexec "os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/purser-dev/purser/internal/procgroup"
	"github.com/purser-dev/purser/sandbox"
)

// Terminal is the user's terminal, for an interactive session (`purser
// shell`): the agent reads and writes it itself, Purser reads none of it,
// and the agent's only way to its provider is still the door.
type Terminal struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// TTY says Stdin is a terminal. An unboxed agent then stays in
	// Purser's process group, the terminal's foreground group, so that it
	// may read the terminal (a background group would be stopped by
	// SIGTTIN), and it gets the terminal's Ctrl-C from the terminal
	// itself. A boxed agent has a session of its own (no controlling
	// terminal: nothing it types can be pushed into ours) and gets every
	// signal from Signals.
	TTY bool
	// Signals are passed on to the agent as they come: the user's Ctrl-C
	// (the agent decides what it means), a window resize. A SIGINT the
	// terminal already delivered to the agent (TTY, unboxed) is not sent
	// twice.
	Signals <-chan os.Signal
	// Grace is how long the agent has, once the session is ended (a hard
	// cap crossed, a second Ctrl-C, SIGTERM), before it is asked to stop:
	// time to show the user the door's refusal it has just got. StopGrace
	// later it is killed, its box with it.
	Grace time.Duration
}

// Interactive makes the backend run the agent on the user's terminal
// rather than on a prompt: its calls give the agent no prompt, read none
// of its output, and never end it for silence (a user may think for an
// hour); the session ends when the agent exits or the call's context ends.
func (b *Backend) Interactive(t *Terminal) { b.term = t }

// interaction is how an interactive agent ended.
type interaction struct {
	waitErr error
	stopped bool // the call's context ended it
}

// interact runs l on the terminal until it exits or ctx ends.
func (b *Backend) interact(ctx context.Context, l launch, dir string, started func(string)) (interaction, error) {
	t := b.term
	cmd := osexec.Command(l.path, l.args...)
	cmd.Dir, cmd.Env = dir, l.env
	stdin, closeStdin, err := stdinOf(t.Stdin)
	if err != nil {
		return interaction{}, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, t.Stdout, t.Stderr
	// Where the terminal's output is not a file, exec copies it through
	// pipes; a tool the agent left holding them must not hold the session
	// open.
	cmd.WaitDelay = time.Second
	sameGroup := t.TTY && !l.boxed
	var group *procgroup.Group
	if sameGroup {
		err = cmd.Start()
	} else if group, err = procgroup.Start(cmd); err == nil && started != nil {
		started(group.ID())
	}
	closeStdin()
	if err != nil {
		return interaction{}, err
	}
	send := func(sig syscall.Signal) {
		switch {
		case l.boxed:
			_ = sandbox.SignalUnder(cmd.Process.Pid, sig)
		case group != nil:
			_ = syscall.Kill(-group.PGID(), sig)
		default:
			_ = cmd.Process.Signal(sig)
		}
	}
	kill := func() {
		if group != nil {
			group.Stop(syscall.SIGKILL, 0, nil)
			return
		}
		_ = cmd.Process.Kill()
	}
	exited := make(chan struct{})
	var stopped atomic.Bool
	go relay(ctx, t, sameGroup, exited, &stopped, send, kill)
	waitErr := cmd.Wait()
	close(exited)
	if group != nil {
		group.End()
	}
	if errors.Is(waitErr, osexec.ErrWaitDelay) {
		waitErr = nil // the agent itself exited; only what it left behind held on
	}
	return interaction{waitErr: waitErr, stopped: stopped.Load()}, nil
}

// stdinOf is the agent's stdin: the terminal's file itself, or, for a
// reader that is not a file, a pipe a goroutine feeds from it. exec would
// copy such a reader too, but Wait would then wait for a read of the
// user's input that may never end. The returned function closes Purser's
// copy of the pipe's read end once the agent has started (or failed to):
// when the agent is gone the feeding goroutine ends at its next write.
func stdinOf(r io.Reader) (io.Reader, func(), error) {
	if _, ok := r.(*os.File); ok || r == nil {
		return r, func() {}, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	go func() {
		_, _ = io.Copy(pw, r)
		pw.Close()
	}()
	return pr, func() { pr.Close() }, nil
}

// relay passes the terminal's signals on to the agent until it exits, and
// ends it when ctx ends: after the terminal's grace, SIGTERM; StopGrace
// later, SIGKILL.
func relay(ctx context.Context, t *Terminal, sameGroup bool, exited <-chan struct{}, stopped *atomic.Bool, send func(syscall.Signal), kill func()) {
	for {
		select {
		case <-exited:
			return
		case s := <-t.Signals:
			sig, ok := s.(syscall.Signal)
			if ok && !(sig == syscall.SIGINT && sameGroup) {
				send(sig)
			}
			continue
		case <-ctx.Done():
		}
		stopped.Store(true)
		for _, step := range []struct {
			wait time.Duration
			do   func()
		}{{t.Grace, func() { send(syscall.SIGTERM) }}, {StopGrace, kill}} {
			timer := time.NewTimer(step.wait)
			select {
			case <-exited:
				timer.Stop()
				return
			case <-timer.C:
				step.do()
			}
		}
		return
	}
}
