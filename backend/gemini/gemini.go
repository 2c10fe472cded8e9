// Package gemini runs Gemini CLI (`gemini -p --output-format stream-json`)
// as a Purser backend. Gemini reports tokens per model in its final result,
// never dollars; a killed run's tokens are recovered from its chat file
// under ~/.gemini/tmp.
package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/internal/usagedelta"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/procgroup"
)

// StopGrace is how long Gemini CLI has after SIGTERM before its group is
// killed. Its launcher ignores signals, so the whole group is signalled.
const StopGrace = 500 * time.Millisecond

// MaxPrompt is the longest prompt passed with -p (one argument may not
// exceed 128 KiB on Linux).
const MaxPrompt = 120 << 10

// Tokens is one model's usage in Gemini's stats: input includes the cached
// tokens; output excludes thoughts, total includes them.
type Tokens struct {
	Total  int64 `json:"total_tokens"`
	Input  int64 `json:"input_tokens"`
	Output int64 `json:"output_tokens"`
	Cached int64 `json:"cached"`
}

func (t Tokens) event(model string) budget.UsageEvent {
	thoughts := max(t.Total-t.Input-t.Output, 0)
	out := t.Output + thoughts // Purser counts reasoning as output
	return budget.UsageEvent{InputTokens: t.Input, CacheReadTokens: min(t.Cached, t.Input), OutputTokens: out,
		ReasoningTokens: thoughts, Model: model}
}

type line struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	Role      string `json:"role"`
	Content   string `json:"content"`
	Error     *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Stats *struct {
		Models map[string]Tokens `json:"models"`
	} `json:"stats"`
	Message string `json:"message"`
}

// Parser reads Gemini CLI's stream-json output and its chat file. The chat
// file gets each model message's tokens as it happens; the final result
// gives each model's totals (the router's calls included). The parser keeps
// what it emitted per message and per model and emits only what is new, so
// each token lands once. Its events carry tokens and the model; the engine
// prices them. It is safe for concurrent use.
type Parser struct {
	mu      sync.Mutex
	session string
	done    bool   // a result line was read
	failed  string // the result's error, if it failed
	text    strings.Builder
	byID    map[string]budget.UsageEvent // chat message id → emitted
	byModel map[string]budget.UsageEvent // model → emitted
	// final holds each model's totals from the result, which is the
	// authority: a chat message written after it adds nothing beyond them.
	final map[string]budget.UsageEvent
}

// NewParser returns a parser.
func NewParser() *Parser {
	return &Parser{byID: map[string]budget.UsageEvent{}, byModel: map[string]budget.UsageEvent{},
		final: map[string]budget.UsageEvent{}}
}

// State says what the run came to: its session, whether a result was read,
// its error, and the assistant's text.
func (p *Parser) State() (session string, done bool, failed, text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.session, p.done, p.failed, p.text.String()
}

func emit(delta budget.UsageEvent) []budget.UsageEvent {
	if delta.Tokens() == 0 {
		return nil
	}
	return []budget.UsageEvent{delta}
}

// Feed reads one line of stdout and returns the usage it adds.
func (p *Parser) Feed(b []byte) ([]budget.UsageEvent, error) {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("gemini: unreadable output line: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch l.Type {
	case "init":
		p.session = l.SessionID
	case "message":
		if l.Role == "assistant" {
			p.text.WriteString(l.Content)
		}
	case "result":
		p.done = true
		if l.Status != "success" {
			p.failed = l.Status
			if l.Error != nil {
				p.failed = l.Error.Message
			}
		}
		if l.Stats == nil {
			return nil, nil
		}
		models := make([]string, 0, len(l.Stats.Models))
		for m := range l.Stats.Models {
			models = append(models, m)
		}
		sort.Strings(models)
		var evs []budget.UsageEvent
		for _, m := range models {
			total := l.Stats.Models[m].event(m)
			p.final[m] = total
			delta, next := usagedelta.Grow(p.byModel[m], total)
			p.byModel[m] = next
			evs = append(evs, emit(delta)...)
		}
		return evs, nil
	}
	return nil, nil
}

// chatLine is one line of Gemini CLI's chat file.
type chatLine struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Model  string `json:"model"`
	Tokens *struct {
		Input    int64 `json:"input"`
		Output   int64 `json:"output"`
		Cached   int64 `json:"cached"`
		Thoughts int64 `json:"thoughts"`
	} `json:"tokens"`
}

// FeedChat reads one line of the chat file, which gets each model message's
// tokens as it happens and keeps them after a kill, and returns what it adds.
func (p *Parser) FeedChat(b []byte) []budget.UsageEvent {
	var l chatLine
	if json.Unmarshal(b, &l) != nil || l.Type != "gemini" || l.Tokens == nil || l.ID == "" {
		return nil
	}
	t := l.Tokens
	want := budget.UsageEvent{InputTokens: max(t.Input, 0), CacheReadTokens: min(max(t.Cached, 0), max(t.Input, 0)),
		OutputTokens: max(t.Output, 0) + max(t.Thoughts, 0), ReasoningTokens: max(t.Thoughts, 0), Model: l.Model}
	p.mu.Lock()
	defer p.mu.Unlock()
	delta, next := usagedelta.Grow(p.byID[l.ID], want)
	p.byID[l.ID] = next
	if total, ok := p.final[l.Model]; ok {
		// The result already counted this model: only room left under its
		// totals can be added.
		room, _ := usagedelta.Grow(p.byModel[l.Model], total)
		delta = usagedelta.Min(delta, room)
	}
	p.byModel[l.Model] = usagedelta.Add(p.byModel[l.Model], delta)
	return emit(delta)
}

// Recover reads a whole chat file and returns what was not counted yet.
func (p *Parser) Recover(chat []byte) []budget.UsageEvent {
	var evs []budget.UsageEvent
	for _, l := range bytes.Split(chat, []byte("\n")) {
		evs = append(evs, p.FeedChat(l)...)
	}
	return evs
}

// Options are the backend's settings in a task or purser.yaml.
type Options struct {
	proc.CLIOptions `yaml:",inline"` // command (default gemini) and env
	// ApprovalMode is passed as --approval-mode (default yolo: shell and
	// file tools).
	ApprovalMode string `yaml:"approvalMode"`
}

// NewOptions returns the backend's options with their defaults, for the
// config loader.
func NewOptions() backend.Options {
	o := defaultOptions()
	return &o
}

func defaultOptions() Options {
	return Options{CLIOptions: proc.CLIOptions{Command: "gemini"}, ApprovalMode: "yolo"}
}

// Validate checks the options' values.
func (o Options) Validate() error {
	errs := []error{o.CLIOptions.Validate()}
	if o.ApprovalMode == "" {
		errs = append(errs, &backend.OptionError{Option: "approvalMode", Msg: "must not be empty (default yolo)"})
	}
	return errors.Join(errs...)
}

// Backend runs Gemini CLI.
type Backend struct {
	cli  proc.CLIOptions
	opts Options
}

var _ purser.Backend = (*Backend)(nil)

// New reads a backend spec's options (see Options) and finds the CLI.
func New(spec purser.BackendSpec) (*Backend, error) {
	o := defaultOptions()
	if err := backend.DecodeChecked(spec, &o); err != nil {
		return nil, err
	}
	return &Backend{cli: o.Resolved(spec.Dir), opts: o}, nil
}

// Call runs one `gemini -p`.
func (b *Backend) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	if len(req.Prompt) > MaxPrompt {
		return purser.CallResult{}, fmt.Errorf("gemini: the prompt is %d bytes; gemini -p takes at most %d (shrink the context)", len(req.Prompt), MaxPrompt)
	}
	p := NewParser()
	upstream, why := b.upstream()
	var seed map[string]string
	if b.cli.Boxed() {
		// The user's settings (its auth type among them); the key is the
		// door's (Keys).
		seed = map[string]string{".gemini/settings.json": filepath.Join(b.cli.Home(), ".gemini", "settings.json")}
	}
	return b.cli.Call(ctx, req, report, proc.CLICall{
		Backend:   "gemini",
		Upstream:  upstream,
		Unmetered: why,
		Needs:     Needs,
		Keys:      Keys,
		Seed:      seed,
		Command: func(wire *proc.WireMeter) (proc.Command, string) {
			return b.command(req, wire)
		},
		Feed:   p.Feed,
		Follow: &proc.FollowSession{Find: func() string { return b.chatFile(req.TaskID, p) }, Feed: p.FeedChat, Every: chatPoll},
		Finish: func(out proc.Outcome, parseErr error, recovered int, _ purser.UsageFunc, res *purser.CallResult) error {
			_, done, failed, text := p.State()
			res.Text = text
			if !done && recovered > 0 {
				res.Note = strings.TrimPrefix(res.Note+"; no result line; usage recovered from the chat file", "; ")
			}
			for range innerRetries(out.Stderr) {
				req.Hooks.InnerRetry() // one Gemini CLI made by itself: counted
			}
			switch {
			case failed != "":
				// The exit code is the HTTP status mod 256, and a total
				// failure may exit 0: the result line is what counts.
				return Classify(failed)
			case !done:
				return out.Unfinished("gemini", "gemini exited without a result", parseErr)
			}
			return nil
		},
	})
}

// command is the `gemini -p` of a call, through the wire meter (nil: not
// metered), and a note when Gemini CLI's own retries could not be switched
// off.
func (b *Backend) command(req purser.CallRequest, wire *proc.WireMeter) (proc.Command, string) {
	args := []string{"-p", req.Prompt, "--skip-trust", "--output-format", "stream-json"}
	if b.opts.ApprovalMode != "" {
		args = append(args, "--approval-mode", b.opts.ApprovalMode)
	}
	if req.Model != "" {
		args = append(args, "-m", req.Model)
	}
	// The launcher would re-spawn itself and ignore signals; no relaunch
	// means a signal to the group stops the CLI itself.
	//
	// Should Purser die, the supervisor kills Gemini CLI at once, with no
	// grace: given one, it went on reading a reply it then failed to write
	// to its chat file (its stdout gone with Purser), so a reply that would
	// have been cut was delivered and lost instead (docs/reliability.md).
	env := b.cli.Environ("GEMINI_CLI_NO_RELAUNCH=true", procgroup.GraceEnv+"=KILL")
	note := ""
	var files []string // seen read-only in Purser's box
	if wire != nil {
		env = append(append(env, wire.Env()...), "GOOGLE_GEMINI_BASE_URL="+wire.URL())
	}
	if settings, err := b.noRetries(); err != nil {
		note = purser.JoinNotes(note, "Gemini CLI's own retries stay on: "+err.Error())
	} else {
		env = append(env, systemSettingsEnv+"="+settings)
		if err := readBySystemSettings(settings); err != nil {
			note = purser.JoinNotes(note, err.Error())
		}
		files = append(files, settings)
	}
	return proc.Command{Args: args, Env: env, Interrupt: syscall.SIGTERM, Grace: StopGrace, Files: files}, note
}

// noRetries returns the system settings file that switches Gemini CLI's
// own retries off, written from the system settings in force.
func (b *Backend) noRetries() (string, error) {
	dir, err := settingsDir()
	if err != nil {
		return "", err
	}
	current := b.cli.Env[systemSettingsEnv]
	if current == "" {
		current = os.Getenv(systemSettingsEnv)
	}
	return noRetrySettings(dir, current)
}

// OwnRetries says in one line whether Gemini CLI's own retries are off for
// this backend's calls, or why they stay on (purser check prints it).
func (b *Backend) OwnRetries() string {
	settings, err := b.noRetries()
	if err == nil {
		err = readBySystemSettings(settings)
	}
	if err != nil {
		return "Gemini CLI's own on: " + err.Error() + "; each retry it announces is counted"
	}
	return "Gemini CLI's own off (general.maxAttempts 1 in " + settings + ")"
}

// chatPoll is how often the chat file is read while Gemini CLI runs.
const chatPoll = 100 * time.Millisecond

// chatFile finds the chat file of the session being run: the one under
// ~/.gemini/tmp that names its session id.
func (b *Backend) chatFile(task string, p *Parser) string {
	session, _, _, _ := p.State()
	if session == "" {
		return ""
	}
	matches, _ := filepath.Glob(filepath.Join(b.cli.HomeFor(task), ".gemini", "tmp", "*", "chats", "session-*.jsonl"))
	for _, m := range matches {
		f, err := os.Open(m)
		if err != nil {
			continue
		}
		head := make([]byte, 4096)
		n, _ := f.Read(head)
		f.Close()
		if bytes.Contains(head[:n], []byte(session)) {
			return m
		}
	}
	return ""
}

var _ purser.SpendRecoverer = (*Backend)(nil)

// RecoverSpend reads a call's chat file, which Gemini CLI writes each model
// message's tokens to as it happens, and returns what it holds beyond the
// ledger. A call killed before its chat file was found is located by where
// Gemini CLI keeps the workspace's chats — ~/.gemini/projects.json maps the
// workspace to its directory under ~/.gemini/tmp (each of which also names
// its workspace in .project_root) — and by the chat's startTime, which must
// not precede the call's start (proc.LocateSession).
func (b *Backend) RecoverSpend(_ context.Context, q purser.SpendQuery) (purser.RecoveredSpend, error) {
	file, note := q.Call.Session, ""
	if file == "" {
		// The patterns are the workspace's own chat directories.
		head := func(_ string, lines [][]byte) (time.Time, string) { return chatStart(lines), q.Workspace }
		file, note = proc.LocateSession(q, b.chatDirs(q.Call.TaskID, q.Workspace), head)
		note = "chat file: " + note
	}
	file, note = proc.Gone(q, "chat file", file, note)
	return proc.RecoverFrom(q, "gemini", file, note, NewParser().FeedChat, false)
}

// Needs are the names of Purser's environment Gemini CLI needs in a box:
// its API keys, of which only the door's scoped token enters (Keys).
// Everything else stays outside (sandbox.EnvAllowList).
var Needs = []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}

// Keys are where Gemini CLI reads its API key, in its order: the door
// holds the first set (x-goog-api-key upstream) and the CLI gets a scoped
// token under its name.
var Keys = proc.Credentials{Names: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}}

// EnvNames are the names that enter the CLI's box: the options' env: and
// the token standing in for its key (purser check lists them).
func (o *Options) EnvNames() []string { return o.CLIOptions.BoxEnvNames(Needs, Keys) }

// DoorKey says which key the door holds for the CLI, by name only.
func (b *Backend) DoorKey() string {
	upstream, why := b.upstream()
	return b.cli.KeyLine(Keys, upstream, why)
}

// DefaultBaseURL is where Gemini CLI sends its requests (with an API key)
// unless GOOGLE_GEMINI_BASE_URL says otherwise.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

// upstream is the Gemini API the CLI would use, or "" and why when it
// reaches its model otherwise (Vertex AI: not metered).
func (b *Backend) upstream() (string, string) {
	return b.cli.Upstream("GOOGLE_GEMINI_BASE_URL", DefaultBaseURL, "GOOGLE_GENAI_USE_VERTEXAI")
}

// Metering says whether the calls are metered at the wire, and where to.
func (b *Backend) Metering() string { return b.cli.Metering(b.upstream()) }

// chatDirs returns the patterns of the chat files of a workspace: under each
// directory of ~/.gemini/tmp that projects.json or its .project_root names
// for it.
func (b *Backend) chatDirs(task, workspace string) []string {
	root := filepath.Join(b.cli.HomeFor(task), ".gemini")
	var ids []string
	if data, err := os.ReadFile(filepath.Join(root, "projects.json")); err == nil {
		var pj struct {
			Projects map[string]string `json:"projects"`
		}
		if json.Unmarshal(data, &pj) == nil {
			for dir, id := range pj.Projects {
				if sameDir(dir, workspace) && id != "" && !strings.ContainsAny(id, "/*?[") {
					ids = append(ids, id)
				}
			}
		}
	}
	marks, _ := filepath.Glob(filepath.Join(root, "tmp", "*", ".project_root"))
	for _, m := range marks {
		if data, err := os.ReadFile(m); err == nil && sameDir(strings.TrimSpace(string(data)), workspace) {
			ids = append(ids, filepath.Base(filepath.Dir(m)))
		}
	}
	seen := map[string]bool{}
	var patterns []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			patterns = append(patterns, filepath.Join(root, "tmp", id, "chats", "session-*.jsonl"))
		}
	}
	return patterns
}

func sameDir(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}

// chatStart reads a chat file's first line for when the session started,
// if it is the CLI's own session ("main"; a subagent's is not a call).
func chatStart(lines [][]byte) time.Time {
	if len(lines) == 0 {
		return time.Time{}
	}
	var h struct {
		StartTime time.Time `json:"startTime"`
		Kind      string    `json:"kind"`
	}
	if json.Unmarshal(lines[0], &h) != nil || (h.Kind != "" && h.Kind != "main") {
		return time.Time{}
	}
	return h.StartTime
}
