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
//     An event without costUsd is priced by the engine from the catalogue, or
//     unknown.
//   - With no report at all, only time and iterations count and the call's
//     dollars are unknown (never $0): BUDGET.md says so.
//   - Exit 0: the call succeeded. Exit 75 (EX_TEMPFAIL): a transient failure
//     the engine may retry (its stderr may name the fault: "connection
//     refused", "429", …). Anything else: the call failed.
//   - A command that prints nothing and appends no usage line for the stall
//     window (stallTimeout) is ended as stalled, and retried.
package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
)

// ExitTransient is the exit code that asks for a retry (sysexits EX_TEMPFAIL).
const ExitTransient = 75

// StopGrace is how long the command has after SIGTERM before SIGKILL.
const StopGrace = 500 * time.Millisecond

// pollEvery is how often the usage file is read while the command runs.
const pollEvery = 20 * time.Millisecond

// Options are the backend's settings in a task or purser.yaml.
type Options struct {
	// Command is the program and its arguments, run without a shell
	// (required). A relative program path with a slash is resolved against
	// the directory of the file that configured the backend; a bare name is
	// looked up on the PATH.
	Command []string `yaml:"command"`
	// Env adds to Purser's environment (in a box: to the allow-list).
	Env map[string]string `yaml:"env"`

	// The sandbox: setting in force, given by the loader (box.go).
	backend.BoxSetting `yaml:"-"`
}

// NewOptions returns the backend's options, for the config loader.
func NewOptions() backend.Options { return &Options{} }

// Validate checks that a command is given.
func (o Options) Validate() error {
	if len(o.Command) == 0 || strings.TrimSpace(o.Command[0]) == "" {
		return &backend.OptionError{Option: "command", Msg: "is required: [program, args...]"}
	}
	return proc.CLIOptions{Command: o.Command[0], Env: o.Env}.Validate()
}

// Check finds the program, resolved against dir, and, in a box, refuses an
// env: name that never enters one.
func (o Options) Check(dir string) error {
	if _, err := proc.FindCommand(o.argv(dir)[0]); err != nil {
		return &backend.OptionError{Option: "command[0]", Msg: err.Error(), Err: err}
	}
	return o.checkBoxEnv()
}

// argv is the command with its program's path resolved against dir.
func (o Options) argv(dir string) []string {
	argv := slices.Clone(o.Command)
	if p := argv[0]; !filepath.IsAbs(p) && strings.Contains(p, "/") {
		argv[0] = filepath.Join(dir, p)
	}
	return argv
}

// Backend runs a command.
type Backend struct {
	argv []string
	env  map[string]string
	box  backend.SandboxConfig
}

var _ purser.Backend = (*Backend)(nil)

// New reads a backend spec's options (see Options) and finds the program.
func New(spec purser.BackendSpec) (*Backend, error) {
	var o Options
	if err := backend.DecodeChecked(spec, &o); err != nil {
		return nil, err
	}
	return &Backend{argv: o.argv(spec.Dir), env: o.Env, box: o.Sandbox()}, nil
}

// Call runs the command once.
func (b *Backend) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	boxed, err := b.boxFor(req)
	if err != nil {
		return purser.CallResult{}, err
	}
	dir, err := callDir(boxed.callRoot())
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
	call := map[string]string{"PURSER_PROMPT_FILE": promptFile, "PURSER_USAGE_FILE": usageFile, "PURSER_MODEL": req.Model,
		"PURSER_CALL_KIND": string(req.Kind), "PURSER_ITERATION": fmt.Sprint(req.Iteration),
		"PURSER_MAX_OUTPUT_TOKENS": fmt.Sprint(req.MaxOutputTokens)}
	path, args, env, err := boxed.command(ctx, b, req.Workspace, call)
	if err != nil {
		return purser.CallResult{}, fmt.Errorf("exec: %w", err)
	}

	usage := &usageLines{model: req.Model, report: report}
	follow := &proc.Follower{Find: func() string { return usageFile }, MaxLine: backend.MaxEventLine, OnLine: usage.read}
	stopFollowing := follow.Every(pollEvery)
	var output strings.Builder
	out, err := proc.Run(ctx, proc.Command{Path: path, Started: req.Hooks.Started, Args: args, Dir: req.Workspace, Env: env,
		Stdin: strings.NewReader(req.Prompt), Interrupt: syscall.SIGTERM, Grace: StopGrace, Box: boxed.box != nil,
		Stall: req.StallTimeout, Progress: follow.Offset}, func(l []byte) {
		if output.Len() < 64<<10 {
			output.Write(l)
			output.WriteByte('\n')
		}
	})
	// The command has exited: the last poll reads what it wrote last, its
	// final line too if it did not end it with a newline.
	stopFollowing()
	if ferr := follow.Err(); ferr != nil {
		// Whatever was reported before stands; what the file became is
		// not read, and the call says so.
		usage.fail(fmt.Errorf("PURSER_USAGE_FILE: %v", ferr))
	}
	if err != nil {
		return purser.CallResult{}, fmt.Errorf("exec: %w", err)
	}
	res := purser.CallResult{Text: output.String()}
	res.Note = usage.note()
	if usage.events == 0 && usage.bad == 0 {
		// No report: money is unknown for this call, never $0.
		report(budget.UsageEvent{Model: req.Model, CostSource: budget.CostUnknown})
		res.Note = strings.TrimPrefix(res.Note+"; the command reported no usage: only time and iterations count, its dollars are unknown", "; ")
	}
	if out.Stopped {
		return res, context.Cause(ctx)
	}
	return res, Classify(b.argv[0], out)
}

// Classify tells how the command ended, as on every backend: a stall (no
// output, no usage line for the stall window), a retry asked for by exit 75
// (the fault its stderr names, if it names one), or a failure.
func Classify(program string, out proc.Outcome) error {
	if out.Stalled {
		return out.Stall()
	}
	var ee *osexec.ExitError
	switch {
	case out.WaitErr == nil:
		return nil
	case errors.As(out.WaitErr, &ee) && ee.ExitCode() == ExitTransient:
		f := proc.TextFault(out.Stderr)
		if !f.Transient() {
			f = proc.FaultRetryable
		}
		return &proc.FaultError{Backend: "exec", Fault: f,
			Detail: fmt.Sprintf("%s asked for a retry (exit %d): %s", program, ExitTransient, proc.LastLines(out.Stderr, 3))}
	}
	return fmt.Errorf("exec: %s: %v: %s", program, out.WaitErr, proc.LastLines(out.Stderr, 5))
}

// usageLines reads the lines of the usage file as the follower passes them.
type usageLines struct {
	model  string
	report purser.UsageFunc
	events int
	bad    int   // lines that could not be read
	err    error // the first bad line, reported in the call's note
}

func (u *usageLines) read(l proc.Line) {
	if l.TooLong {
		u.fail(fmt.Errorf("PURSER_USAGE_FILE line %d: longer than %d bytes", l.N, backend.MaxEventLine))
		return
	}
	text := bytes.TrimSpace(l.Text)
	if len(text) == 0 {
		return
	}
	ev, err := backend.ParseEventLine(text, nil)
	if err != nil {
		u.fail(fmt.Errorf("PURSER_USAGE_FILE line %d: %v", l.N, err))
		return
	}
	if ev.Model == "" {
		ev.Model = u.model
	}
	u.events++
	u.report(ev)
}

// fail notes a line that could not be read and records its usage as unknown:
// whatever it reported (tokens, dollars) is missing from the ledger, so the
// call's money becomes partial — never less money under a reported label.
func (u *usageLines) fail(err error) {
	u.bad++
	if u.err == nil {
		u.err = err
	}
	u.report(budget.UsageEvent{Model: u.model, CostSource: budget.CostUnknown})
}

// note says which lines could not be read.
func (u *usageLines) note() string {
	if u.bad == 0 {
		return ""
	}
	more := ""
	if u.bad > 1 {
		more = fmt.Sprintf(" (and %d more unreadable line(s))", u.bad-1)
	}
	return fmt.Sprintf("%v%s: what it reported is unknown, so this call's dollars are partial", u.err, more)
}
