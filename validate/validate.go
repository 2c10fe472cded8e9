// Package validate runs a task's validators: shell commands in the
// workspace, each in its own process group, killed whole on timeout; what a
// validator leaves running is ended when it ends.
package validate

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/redact"
)

// MaxOutput is how much of a validator's output is kept: the first and last
// halves, with the middle cut (the end of a test run says what failed, the
// start says what ran).
const MaxOutput = 64 << 10

// KillGrace is how long a timed-out validator's process group has between
// SIGTERM and SIGKILL.
const KillGrace = 2 * time.Second

// Runner runs validators with sh.
type Runner struct {
	// Sandbox, when set, runs each validator in a box (docs/sandbox.md);
	// nil runs it unboxed, as Purser's user with its environment.
	Sandbox *Sandbox
}

var _ purser.ValidatorRunner = Runner{}

// RunValidator runs v in workspace. It never returns an error: a validator
// that cannot start, times out or is cancelled fails, and says why.
func (r Runner) RunValidator(ctx context.Context, workspace string, v purser.Validator) purser.ValidatorResult {
	timeout := v.Timeout
	if timeout <= 0 {
		timeout = purser.DefaultValidatorTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	out := &headTail{max: MaxOutput}
	res := purser.ValidatorResult{Name: v.Name, ExitCode: -1}
	start := time.Now()
	rr, ok := ran{}, false
	if r.Sandbox != nil {
		rr, ok = r.runResident(ctx, workspace, v.Run, out)
	} else {
		rr, ok = runSupervised(ctx, workspace, v.Run, out)
	}
	if ok {
		res.Duration = time.Since(start)
		if rr.status >= 0 && !rr.stopped {
			res.ExitCode, res.Passed = rr.status, rr.status == 0
		}
		if rr.err != nil {
			next := "box"
			if r.Sandbox == nil {
				next = "supervisor"
			}
			out.WriteString("\n[purser: " + rr.err.Error() + "; the next validator gets a new " + next + "]")
		}
		return finish(ctx, res, out, timeout, rr.stopped)
	}
	cmd, lifeline, err := r.command(workspace, v.Run)
	if err != nil {
		res.Output = "could not start: " + err.Error()
		return res
	}
	if lifeline != nil {
		defer lifeline.Close() // the box ends, if it has not
	}
	cmd.Dir = workspace
	cmd.Stdout, cmd.Stderr = out, out
	group, err := r.start(cmd)
	if err != nil {
		res.Output = "could not start: " + err.Error()
		return res
	}
	exited := make(chan struct{})
	go func() {
		err = cmd.Wait()
		close(exited)
	}()
	stopped := false
	select {
	case <-exited:
	case <-ctx.Done():
		stopped = true
		group.Stop(syscall.SIGTERM, KillGrace, exited)
		<-exited
	}
	// What the validator left running goes with it.
	group.End()
	res.Duration = time.Since(start)
	var ee *exec.ExitError
	switch {
	case err == nil:
		res.ExitCode, res.Passed = 0, true
	case errors.As(err, &ee) && ee.Exited():
		res.ExitCode = ee.ExitCode()
	}
	return finish(ctx, res, out, timeout, stopped)
}

// finish completes res once its validator has ended: its output, and why
// it failed when ctx ended (stopped: it ended the validator, which timed
// out after timeout when that was the deadline; or it was cancelled).
func finish(ctx context.Context, res purser.ValidatorResult, out *headTail, timeout time.Duration, stopped bool) purser.ValidatorResult {
	// Secrets a validator prints never reach a prompt, the database or a
	// report: String redacts before it cuts.
	res.Output = out.String()
	res.TimedOut = stopped && errors.Is(ctx.Err(), context.DeadlineExceeded)
	if res.TimedOut {
		res.Output += "\n[purser: validator timed out after " + timeout.String() + "; its process group was killed]"
		res.Passed = false
	} else if ctx.Err() != nil {
		res.Output += "\n[purser: validator cancelled; its process group was killed]"
		res.Passed = false
	}
	return res
}

// redactMargin is how much more than it shows headTail keeps on each side
// of the cut, so that a secret straddling a cut is seen whole by the
// redactor and masked, never half kept: longer than any secret's text (a
// 4096-bit RSA private key in PEM is about 3.3 KiB).
const redactMargin = 16 << 10

// headTail keeps the first and last max/2 bytes written to it, and
// redactMargin more on each side of the cut.
type headTail struct {
	mu      sync.Mutex
	max     int
	head    []byte // the first max/2+redactMargin bytes
	tail    []byte // the last max/2+redactMargin bytes after head
	dropped int64  // bytes between head and tail
}

// WriteString writes s.
func (h *headTail) WriteString(s string) { _, _ = h.Write([]byte(s)) }

func (h *headTail) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(p)
	keep := h.max/2 + redactMargin
	if room := keep - len(h.head); room > 0 {
		k := min(room, len(p))
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	h.tail = append(h.tail, p...)
	if over := len(h.tail) - keep; over > 0 {
		h.dropped += int64(over)
		h.tail = append(h.tail[:0], h.tail[over:]...)
	}
	return n, nil
}

// String returns the output redacted, then cut: the first and last max/2
// bytes with the middle cut. Redacting first means a secret across a cut is
// masked whole.
func (h *headTail) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	total := int64(len(h.head)) + h.dropped + int64(len(h.tail))
	if total <= int64(h.max) {
		return redact.String(string(h.head) + string(h.tail))
	}
	half := h.max / 2
	first, last := string(h.head), string(h.tail)
	if h.dropped == 0 {
		// Head and tail meet: redact them as one text.
		first = redact.String(first + last)
		last = first
	} else {
		first, last = redact.String(first), redact.String(last)
	}
	var b bytes.Buffer
	b.WriteString(first[:min(half, len(first))])
	b.WriteString("\n[… " + strconv.FormatInt(total-int64(2*half), 10) + " bytes cut from the middle …]\n")
	b.WriteString(last[max(0, len(last)-half):])
	return b.String()
}
