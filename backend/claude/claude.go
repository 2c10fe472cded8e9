// Package claude runs Claude Code headless (`claude -p --output-format
// stream-json`) as a Purser backend: usage is read from the stream as it
// arrives, reconciled to the CLI's reported cost at the end, and recovered
// from the session transcript when the CLI is stopped before it reports.
package claude

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/redact"
)

// StopGrace is how long Claude Code has, after SIGINT, to print its final
// result before its process group is killed.
const StopGrace = 500 * time.Millisecond

// Options are the backend's settings in a task or purser.yaml.
type Options struct {
	proc.CLIOptions `yaml:",inline"` // command (default claude) and env
	// PermissionMode is passed as --permission-mode (default acceptEdits).
	PermissionMode string `yaml:"permissionMode"`
	// AllowedTools is passed as --allowedTools (default Bash, Edit, Write,
	// Read, Glob, Grep).
	AllowedTools []string `yaml:"allowedTools"`
	// MaxTurns is passed as --max-turns; 0 leaves Claude Code's default.
	MaxTurns int `yaml:"maxTurns"`
	// BudgetFence passes --max-budget-usd as a second fence (default true).
	BudgetFence bool `yaml:"budgetFence"`
	// Login names a subscription login the door holds ("claude": the
	// user's browser login, ~/.claude/.credentials.json, login.go).
	Login string `yaml:"login"`
}

// NewOptions returns the backend's options with their defaults, for the
// config loader.
func NewOptions() backend.Options {
	o := defaultOptions()
	return &o
}

func defaultOptions() Options {
	return Options{CLIOptions: proc.CLIOptions{Command: "claude"}, PermissionMode: "acceptEdits",
		AllowedTools: []string{"Bash", "Edit", "Write", "Read", "Glob", "Grep"}, BudgetFence: true}
}

// Validate checks the options' values.
func (o Options) Validate() error {
	errs := []error{o.CLIOptions.Validate()}
	if o.PermissionMode == "" {
		errs = append(errs, &backend.OptionError{Option: "permissionMode", Msg: "must not be empty (default acceptEdits)"})
	}
	for i, tool := range o.AllowedTools {
		if strings.TrimSpace(tool) == "" {
			errs = append(errs, &backend.OptionError{Option: fmt.Sprintf("allowedTools[%d]", i), Msg: "must not be empty"})
		}
	}
	if o.Login != "" && o.Login != LoginClaude {
		errs = append(errs, &backend.OptionError{Option: "login", Msg: fmt.Sprintf("%q: want %q (Claude Code's browser login, held by Purser's door)", o.Login, LoginClaude)})
	}
	if o.MaxTurns < 0 {
		errs = append(errs, &backend.OptionError{Option: "maxTurns", Msg: fmt.Sprintf("must not be negative, got %d", o.MaxTurns)})
	}
	return errors.Join(errs...)
}

// Backend runs Claude Code.
type Backend struct {
	cli  proc.CLIOptions
	opts Options
}

var (
	_ purser.Backend    = (*Backend)(nil)
	_ purser.SpendFence = (*Backend)(nil)
)

// FencesUSD reports whether calls pass --max-budget-usd (budgetFence, on by
// default): Claude Code then stops itself at what is left under the money
// cap, pricing a model it does not know at Opus rates, so a model Purser has
// no price for is still bounded during the call.
func (b *Backend) FencesUSD(string) bool { return b.opts.BudgetFence }

// New reads a backend spec's options (see Options) and finds the CLI.
func New(spec purser.BackendSpec) (*Backend, error) {
	o := defaultOptions()
	if err := backend.DecodeChecked(spec, &o); err != nil {
		return nil, err
	}
	return &Backend{cli: o.Resolved(spec.Dir), opts: o}, nil
}

func (b *Backend) args(req purser.CallRequest) []string {
	args := []string{"-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages"}
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}
	if b.opts.PermissionMode != "" {
		args = append(args, "--permission-mode", b.opts.PermissionMode)
	}
	if len(b.opts.AllowedTools) > 0 {
		args = append(args, "--allowedTools", strings.Join(b.opts.AllowedTools, ","))
	}
	if b.opts.MaxTurns > 0 {
		args = append(args, "--max-turns", fmt.Sprint(b.opts.MaxTurns))
	}
	if b.opts.BudgetFence && req.MaxUSD > 0 {
		args = append(args, "--max-budget-usd", req.MaxUSD.Decimal())
	}
	return args
}

// env is the child's environment, with the settings that keep retries and
// side calls Purser's to count.
func (b *Backend) env(extra ...string) []string {
	return b.cli.Environ(append([]string{
		"CLAUDE_CODE_MAX_RETRIES=0",                  // retries are Purser's: counted and budgeted
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", // no extra billed side calls
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1"}, extra...)...)
}

// Needs are the names of Purser's environment Claude Code needs in a box:
// the settings that pick Anthropic's API, and its credentials, of which
// only the door's scoped token enters (keys). Everything else stays
// outside (sandbox.EnvAllowList).
var Needs = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL"}

// EnvNames are the names that enter the CLI's box: the options' env: and
// the token standing in for its key (purser check lists them).
func (o *Options) EnvNames() []string { return o.CLIOptions.BoxEnvNames(Needs, o.keys()) }

// DoorKey says which key the door holds for the CLI, by name only.
func (b *Backend) DoorKey() string {
	upstream, why := b.upstream()
	line := b.cli.KeyLine(b.opts.keys(), upstream, why)
	if n := b.opts.LoginNote(time.Now()); n != "" {
		line += "; " + n
	}
	return line
}

// DefaultBaseURL is where Claude Code sends its requests unless
// ANTHROPIC_BASE_URL says otherwise.
const DefaultBaseURL = "https://api.anthropic.com"

// upstream is the Anthropic API the CLI would use, or "" and why when it
// reaches its model otherwise (Bedrock, Vertex and Foundry: not metered).
func (b *Backend) upstream() (string, string) {
	return b.cli.Upstream("ANTHROPIC_BASE_URL", DefaultBaseURL, "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY")
}

// Metering says whether the calls are metered at the wire, and where to.
func (b *Backend) Metering() string { return b.cli.Metering(b.upstream()) }

// Call runs one `claude -p` to completion, or until ctx is done: then it is
// interrupted (SIGINT, which still yields a result with the cost so far),
// and its process group is killed after StopGrace.
func (b *Backend) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	p := NewParser()
	upstream, why := b.upstream()
	return b.cli.Call(ctx, req, report, proc.CLICall{
		Backend:   "claude",
		Upstream:  upstream,
		Unmetered: why,
		Needs:     Needs,
		Keys:      b.opts.keys(),
		Command: func(wire *proc.WireMeter) (proc.Command, string) {
			var wireEnv []string
			if wire != nil {
				wireEnv = append(wire.Env(), "ANTHROPIC_BASE_URL="+wire.URL())
			}
			return proc.Command{Args: b.args(req), Env: b.env(wireEnv...), Stdin: strings.NewReader(req.Prompt),
				Interrupt: syscall.SIGINT, Grace: StopGrace}, ""
		},
		Feed:    p.Feed,
		Retries: p.Retries, // ones Claude Code made although told not to
		Session: func() string {
			if p.Session() == "" {
				return ""
			}
			return b.transcriptPath(req.TaskID, req.Workspace, p.Session())
		},
		Finish: func(out proc.Outcome, parseErr error, _ int, report purser.UsageFunc, res *purser.CallResult) error {
			b.finish(p, req, report, res)
			res.Note = purser.JoinNotes(res.Note, b.opts.LoginNote(time.Now()))
			return b.outcome(p, out, parseErr)
		},
	})
}

// finish reports what the result line settles (or, without one, what the
// transcript kept), and notes it.
func (b *Backend) finish(p *Parser, req purser.CallRequest, report purser.UsageFunc, res *purser.CallResult) {
	if p.Result() != nil {
		if p.SpawnedSubAgents() && p.Session() != "" {
			// Sub-agents spawned together stream none of their messages:
			// their transcripts name them, so their usage is booked to
			// them before the result settles the rest.
			for _, ev := range b.recover(req.TaskID, p) {
				report(ev)
			}
		}
		adj, note := p.Reconcile(req.Price)
		for _, ev := range adj {
			report(ev)
		}
		res.Note, res.Text = purser.JoinNotes(res.Note, note), p.Result().Result
	} else if p.Session() != "" {
		// No result line (killed, or SIGTERM): the transcript kept the usage.
		for _, ev := range b.recover(req.TaskID, p) {
			report(ev)
		}
		res.Note = purser.JoinNotes(res.Note, "no result line; usage recovered from the session transcript")
	}
	if p.Retries() > 0 {
		res.Note = strings.TrimPrefix(res.Note+fmt.Sprintf("; %d API retries inside Claude Code", p.Retries()), "; ")
	}
}

// outcome decides how the call ended. The exit code is not trusted alone: the
// result line says more.
func (b *Backend) outcome(p *Parser, out proc.Outcome, parseErr error) error {
	r := p.Result()
	if r == nil {
		return out.Unfinished("claude", "claude exited without a result", parseErr)
	}
	// The result's text is the agent's: it may quote a key.
	text := redact.String(r.Result)
	switch {
	case r.Subtype == "error_max_budget_usd":
		return fmt.Errorf("claude stopped at its --max-budget-usd fence (%s): %w", redact.String(strings.Join(r.Errors, "; ")), budget.ErrInsufficientBudget)
	case r.Subtype == "error_max_turns":
		return nil // the turns are spent; the validators say whether it worked
	case r.IsError:
		return Classify(r.APIErrorStatus, text)
	}
	return nil
}

// Classify tells a failed result's fault from its HTTP status, or, without
// one (a refused or dropped connection), from its words.
func Classify(status *int, text string) error {
	f := proc.TextFault(text)
	if status != nil && *status != 0 {
		f = proc.StatusFault(*status)
	}
	return &proc.FaultError{Backend: "claude", Fault: f, Detail: text}
}

// recover reads the session transcript under $HOME/.claude/projects for the
// usage the stream did not report.
func (b *Backend) recover(task string, p *Parser) []budget.UsageEvent {
	matches, _ := filepath.Glob(filepath.Join(b.cli.HomeFor(task), ".claude", "projects", "*", p.Session()+".jsonl"))
	matches = append(matches, subAgentTranscripts(matches)...) // after the session's, which names the sub-agents
	var out []budget.UsageEvent
	for _, m := range matches {
		f, err := os.Open(m)
		if err != nil {
			continue
		}
		r := bufio.NewReaderSize(f, 64<<10)
		for {
			line, err := proc.ReadLine(r)
			out = append(out, p.FeedTranscript(line)...)
			if err != nil {
				break
			}
		}
		f.Close()
	}
	return out
}

// transcriptPath is where Claude Code keeps a session's transcript: under
// ~/.claude/projects, in a directory named after the workspace's real path
// with every character other than a letter or a digit made a dash. Where
// a transcript of the session already exists, that one.
func (b *Backend) transcriptPath(task, workspace, session string) string {
	home := b.cli.HomeFor(task)
	if m, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", session+".jsonl")); len(m) > 0 {
		return m[0]
	}
	if real, err := filepath.EvalSymlinks(workspace); err == nil {
		workspace = real
	}
	slug := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, workspace)
	return filepath.Join(home, ".claude", "projects", slug, session+".jsonl")
}

var _ purser.SpendRecoverer = (*Backend)(nil)

// RecoverSpend reads a call's session transcript, which keeps each API
// message's final usage even when Claude Code was killed, and returns what
// it holds beyond the ledger. The path recorded at the call's start is
// where the transcript would be; should it lie elsewhere, it is found by its
// session id (its name). A call killed before Claude Code said its session
// is located among ~/.claude/projects/*/*.jsonl by the transcript's first
// lines: the cwd they name must be the workspace, and their first timestamp
// not precede the call's start (proc.LocateSession).
func (b *Backend) RecoverSpend(_ context.Context, q purser.SpendQuery) (purser.RecoveredSpend, error) {
	file, note := q.Call.Session, ""
	projects := filepath.Join(b.cli.HomeFor(q.Call.TaskID), ".claude", "projects")
	if file != "" {
		if _, err := os.Lstat(file); err != nil {
			if m, _ := filepath.Glob(filepath.Join(projects, "*", filepath.Base(file))); len(m) > 0 {
				file = m[0]
			} else {
				// Killed before Claude Code wrote anything of the session.
				note, file = fmt.Sprintf("transcript %s was never written", file), ""
			}
		}
	} else {
		file, note = proc.LocateSession(q, []string{filepath.Join(projects, "*", "*.jsonl")}, transcriptHead)
		note = "transcript: " + note
	}
	// Compared as one sum, not per model: Claude Code's result names a model
	// as "claude-opus-4-8[1m]" where its stream says "claude-opus-4-8", and
	// the reconciliation recorded under the former must not be taken for
	// usage the transcript adds under the latter.
	return proc.RecoverFrom(q, "claude", file, note, NewParser().FeedTranscript, true)
}

// transcriptHead reads a transcript's first lines: the first timestamp (the
// session's start) and the first cwd (where Claude Code ran).
func transcriptHead(_ string, lines [][]byte) (started time.Time, dir string) {
	for _, l := range lines {
		var h struct {
			Timestamp time.Time `json:"timestamp"`
			Cwd       string    `json:"cwd"`
		}
		if json.Unmarshal(l, &h) != nil {
			continue
		}
		if started.IsZero() {
			started = h.Timestamp
		}
		if dir == "" {
			dir = h.Cwd
		}
		if !started.IsZero() && dir != "" {
			break
		}
	}
	return started, dir
}
