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
	"github.com/purser-dev/purser/internal/procgroup"
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
type Runner struct{}

var _ purser.ValidatorRunner = Runner{}

// RunValidator runs v in workspace. It never returns an error: a validator
// that cannot start, times out or is cancelled fails, and says why.
func (Runner) RunValidator(ctx context.Context, workspace string, v purser.Validator) purser.ValidatorResult {
	timeout := v.Timeout
	if timeout <= 0 {
		timeout = purser.DefaultValidatorTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	out := &headTail{max: MaxOutput}
	cmd := exec.Command("sh", "-c", v.Run)
	cmd.Dir = workspace
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	res := purser.ValidatorResult{Name: v.Name, ExitCode: -1}
	group, err := procgroup.Start(cmd)
	if err != nil {
		res.Output = "could not start: " + err.Error()
		return res
	}
	exited := make(chan struct{})
	go func() {
		err = cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-ctx.Done():
		res.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		group.Stop(syscall.SIGTERM, KillGrace, exited)
		<-exited
	}
	// What the validator left running goes with it.
	group.End()
	res.Duration = time.Since(start)
	// Secrets a validator prints never reach a prompt, the database or a report.
	res.Output = redact.String(out.String())
	var ee *exec.ExitError
	switch {
	case err == nil:
		res.ExitCode, res.Passed = 0, true
	case errors.As(err, &ee) && ee.Exited():
		res.ExitCode = ee.ExitCode()
	}
	if res.TimedOut {
		res.Output += "\n[purser: validator timed out after " + timeout.String() + "; its process group was killed]"
		res.Passed = false
	} else if ctx.Err() != nil {
		res.Output += "\n[purser: validator cancelled; its process group was killed]"
		res.Passed = false
	}
	return res
}

// headTail keeps the first and last max/2 bytes written to it.
type headTail struct {
	mu      sync.Mutex
	max     int
	head    []byte
	tail    []byte
	dropped int64
}

func (h *headTail) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(p)
	half := h.max / 2
	if room := half - len(h.head); room > 0 {
		k := min(room, len(p))
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	h.tail = append(h.tail, p...)
	if over := len(h.tail) - half; over > 0 {
		h.dropped += int64(over)
		h.tail = append(h.tail[:0], h.tail[over:]...)
	}
	return n, nil
}

func (h *headTail) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b bytes.Buffer
	b.Write(h.head)
	if h.dropped > 0 {
		b.WriteString("\n[… " + strconv.FormatInt(h.dropped, 10) + " bytes cut from the middle …]\n")
	}
	b.Write(h.tail)
	return b.String()
}
