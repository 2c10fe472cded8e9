// Package exec runs any command as a Purser backend. The protocol:
//
//   - The prompt is on the command's stdin, and in the file named by
//     PURSER_PROMPT_FILE. The command runs in the workspace, in its own
//     process group.
//   - PURSER_MODEL, PURSER_CALL_KIND, PURSER_ITERATION and
//     PURSER_MAX_OUTPUT_TOKENS (0: no cap) describe the call.
//   - To report usage, the command appends JSON lines to the file named by
//     PURSER_USAGE_FILE, one event per line, with the fields of a
//     `purser budget eval` events file: inputTokens, outputTokens,
//     cacheReadTokens, cacheWriteTokens, costUsd, model. Purser reads the file
//     as it grows, so a hard cap crossed mid-call stops the command at once.
//     An event without costUsd is priced from the catalogue, or unknown.
//   - With no report at all, only time and iterations count and the call's
//     dollars are unknown (never $0): BUDGET.md says so.
//   - Exit 0: the call succeeded. Exit 75 (EX_TEMPFAIL): a transient failure
//     the engine may retry. Anything else: the call failed.
package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/pricing"
)

// ExitTransient is the exit code that asks for a retry (sysexits EX_TEMPFAIL).
const ExitTransient = 75

// StopGrace is how long the command has after SIGTERM before SIGKILL.
const StopGrace = 500 * time.Millisecond

// pollEvery is how often the usage file is read while the command runs.
const pollEvery = 20 * time.Millisecond

// Backend runs a command.
type Backend struct {
	argv   []string
	env    map[string]string
	prices *pricing.Catalogue
}

var _ purser.Backend = (*Backend)(nil)

// New reads the options: command (a list: the program and its arguments,
// run without a shell) and env.
func New(spec purser.BackendSpec, prices *pricing.Catalogue) (*Backend, error) {
	b := &Backend{prices: prices, env: map[string]string{}}
	for k, v := range spec.Options {
		switch k {
		case "command":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				return nil, errors.New("exec backend: option command must be a list: [program, args...]")
			}
			for _, a := range list {
				s, ok := a.(string)
				if !ok {
					return nil, errors.New("exec backend: option command must be a list of strings")
				}
				b.argv = append(b.argv, s)
			}
		case "env":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, errors.New("exec backend: option env must be a mapping")
			}
			for ek, ev := range m {
				b.env[ek] = fmt.Sprint(ev)
			}
		default:
			return nil, fmt.Errorf("exec backend: unknown option %q (want command, env)", k)
		}
	}
	if len(b.argv) == 0 {
		return nil, errors.New("exec backend: option command is required: [program, args...]")
	}
	if p := b.argv[0]; !filepath.IsAbs(p) && strings.Contains(p, "/") {
		b.argv[0] = filepath.Join(spec.Dir, p)
	} else if !strings.Contains(p, "/") {
		if _, err := osexec.LookPath(p); err != nil {
			return nil, fmt.Errorf("exec backend: %s: %w", p, err)
		}
	}
	return b, nil
}

// Call runs the command once.
func (b *Backend) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	dir, err := os.MkdirTemp("", "purser-exec-")
	if err != nil {
		return purser.CallResult{}, err
	}
	defer os.RemoveAll(dir)
	promptFile, usageFile := filepath.Join(dir, "prompt.txt"), filepath.Join(dir, "usage.jsonl")
	if err := os.WriteFile(promptFile, []byte(req.Prompt), 0o600); err != nil {
		return purser.CallResult{}, err
	}
	if err := os.WriteFile(usageFile, nil, 0o600); err != nil {
		return purser.CallResult{}, err
	}
	env := os.Environ()
	for k, v := range b.env {
		env = append(env, k+"="+v)
	}
	env = append(env, "PURSER_PROMPT_FILE="+promptFile, "PURSER_USAGE_FILE="+usageFile, "PURSER_MODEL="+req.Model,
		"PURSER_CALL_KIND="+string(req.Kind), fmt.Sprintf("PURSER_ITERATION=%d", req.Iteration),
		fmt.Sprintf("PURSER_MAX_OUTPUT_TOKENS=%d", req.MaxOutputTokens))

	t := &tailer{path: usageFile, prices: b.prices, model: req.Model, report: report}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(pollEvery)
		defer tick.Stop()
		for {
			t.poll()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	var output strings.Builder
	out, err := proc.Run(ctx, proc.Command{Path: b.argv[0], Args: b.argv[1:], Dir: req.Workspace, Env: env,
		Stdin: strings.NewReader(req.Prompt), Interrupt: syscall.SIGTERM, Grace: StopGrace}, func(l []byte) {
		if output.Len() < 64<<10 {
			output.Write(l)
			output.WriteByte('\n')
		}
	})
	close(stop)
	wg.Wait()
	for t.poll() { // what was written last, within the bounds
	}
	t.flush()
	if err != nil {
		return purser.CallResult{}, fmt.Errorf("exec: %w", err)
	}
	res := purser.CallResult{Text: output.String()}
	if t.err != nil {
		res.Note = t.err.Error()
	}
	if t.events == 0 {
		// No report: money is unknown for this call, never $0.
		report(budget.UsageEvent{Model: req.Model, CostSource: budget.CostUnknown})
		res.Note = strings.TrimPrefix(res.Note+"; the command reported no usage: only time and iterations count, its dollars are unknown", "; ")
	}
	if out.Stopped {
		return res, context.Cause(ctx)
	}
	var ee *osexec.ExitError
	switch {
	case out.WaitErr == nil:
		return res, nil
	case errors.As(out.WaitErr, &ee) && ee.ExitCode() == ExitTransient:
		return res, fmt.Errorf("exec: %s asked for a retry (exit %d): %s: %w", b.argv[0], ExitTransient, proc.LastLines(out.Stderr, 3), purser.ErrTransient)
	}
	return res, fmt.Errorf("exec: %s: %v: %s", b.argv[0], out.WaitErr, proc.LastLines(out.Stderr, 5))
}

// MaxUsageBytes is the most of the usage file read in one call; what
// follows is ignored, and the call's note says so. A command reporting
// usage writes a few hundred bytes an event.
const MaxUsageBytes = 64 << 20

// pollBytes is the most read from the usage file in one poll, so that a
// poll always returns promptly to notice that the call is over.
const pollBytes = 1 << 20

// openUsage opens the usage file for reading without following a symlink
// or blocking on a FIFO (O_NOFOLLOW|O_NONBLOCK), and refuses anything but a
// regular file: the command may have replaced it with anything.
func openUsage(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("it was replaced by a symbolic link: %w", err)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("it was replaced by something not a regular file (%s)", fi.Mode().Type())
	}
	return f, nil
}

// tailer reads the usage file as it grows, whole lines only. A line is kept
// only up to config.MaxEventLine bytes, and at most MaxUsageBytes are read.
type tailer struct {
	path     string
	prices   *pricing.Catalogue
	model    string
	report   purser.UsageFunc
	offset   int64
	partial  []byte
	skipping bool // in a line longer than config.MaxEventLine
	done     bool // the file was refused or its bound reached: read no more
	buf      []byte
	line     int
	events   int
	err      error // the first problem, reported in the call's note
}

// poll reads what was appended since the last poll, at most pollBytes, and
// reports whether there may be more to read now.
func (t *tailer) poll() bool {
	if t.done {
		return false
	}
	f, err := openUsage(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		t.fail(fmt.Errorf("PURSER_USAGE_FILE: %v; not read any further", err))
		t.done = true
		return false
	}
	defer f.Close()
	if t.buf == nil {
		t.buf = make([]byte, 64<<10)
	}
	limit := min(int64(pollBytes), MaxUsageBytes-t.offset)
	var read int64
	for read < limit {
		n, err := f.ReadAt(t.buf[:min(int64(len(t.buf)), limit-read)], t.offset)
		t.consume(t.buf[:n])
		t.offset += int64(n)
		read += int64(n)
		if err != nil {
			return false // EOF: an unfinished line waits in t.partial
		}
	}
	if t.offset >= MaxUsageBytes {
		t.fail(fmt.Errorf("PURSER_USAGE_FILE: more than %d bytes; the rest is ignored", MaxUsageBytes))
		t.done = true
		return false
	}
	return true
}

// consume splits data into lines, keeping at most config.MaxEventLine bytes
// of an unfinished one.
func (t *tailer) consume(data []byte) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if !t.skipping {
				t.partial = append(t.partial, data...)
				t.tooLong()
			}
			return
		}
		if t.skipping {
			t.skipping = false
		} else {
			t.partial = append(t.partial, data[:i]...)
			if !t.tooLong() {
				t.handle(t.partial)
			}
		}
		t.partial = t.partial[:0]
		data = data[i+1:]
	}
}

// tooLong starts skipping the current line once it passes
// config.MaxEventLine bytes.
func (t *tailer) tooLong() bool {
	if len(t.partial) <= config.MaxEventLine {
		return false
	}
	t.line++
	t.fail(fmt.Errorf("PURSER_USAGE_FILE line %d: longer than %d bytes, ignored", t.line, config.MaxEventLine))
	t.partial, t.skipping = nil, true
	return true
}

// handle reads one whole line.
func (t *tailer) handle(line []byte) {
	t.line++
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	ev, err := config.ParseEventLine(line, nil)
	if err != nil {
		t.fail(fmt.Errorf("PURSER_USAGE_FILE line %d: %v (ignored)", t.line, err))
		return
	}
	if ev.Model == "" {
		ev.Model = t.model
	}
	if t.prices != nil {
		ev = t.prices.Estimate(ev)
	}
	t.events++
	t.report(ev)
}

// flush reads a last line the command did not end with a newline, from
// memory: nothing is ever written to the usage file's path, which the
// command may have pointed anywhere.
func (t *tailer) flush() {
	if !t.skipping && len(bytes.TrimSpace(t.partial)) > 0 {
		t.handle(t.partial)
	}
	t.partial, t.skipping = nil, false
}

func (t *tailer) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}
