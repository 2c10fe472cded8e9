// Package codex runs the OpenAI Codex CLI (`codex exec --json`) as a Purser
// backend. Codex reports tokens, never dollars: the engine estimates them
// from the catalogue, or records them as unknown. Usage a killed run never printed is recovered
// from its rollout file under $CODEX_HOME/sessions.
package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/internal/usagedelta"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/procgroup"
	"github.com/purser-dev/purser/redact"
)

// StopGrace is how long Codex has after SIGINT before its group is killed.
const StopGrace = 500 * time.Millisecond

// Usage is Codex's token usage: input includes the cached tokens.
type Usage struct {
	Input      int64 `json:"input_tokens"`
	Cached     int64 `json:"cached_input_tokens"`
	CacheWrite int64 `json:"cache_write_input_tokens"`
	Output     int64 `json:"output_tokens"`
	Reasoning  int64 `json:"reasoning_output_tokens"`
}

func (u Usage) event(model string) budget.UsageEvent {
	ev := budget.UsageEvent{InputTokens: u.Input, CacheReadTokens: min(u.Cached, u.Input), OutputTokens: u.Output,
		ReasoningTokens: min(u.Reasoning, u.Output), Model: model}
	ev.CacheWriteTokens = min(u.CacheWrite, ev.InputTokens-ev.CacheReadTokens)
	return ev
}

type line struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Message  string `json:"message"`
	Usage    *Usage `json:"usage"`
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"`
	Item *struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"item"`
}

// Parser reads `codex exec --json` output and Codex's rollout file. Both
// report cumulative figures: turn.completed the turn's total, the rollout a
// running total after every model call. The parser keeps the thread's total
// so far and emits only what is new, so each token lands once whichever
// source reports it first. It is safe for concurrent use.
type Parser struct {
	model string

	mu        sync.Mutex
	emitted   budget.UsageEvent // the thread's total so far, from whichever source said it first
	turnsBase Usage             // the sum of the turns completed before this one
	Thread    string
	Failed    string // turn.failed's message
	Done      bool   // a turn completed
	Text      string // the last agent message
	Retries   int    // "Reconnecting..." announcements
	// Offline: Codex said it is "waiting for network" (a refused
	// connection), which it would wait out without end.
	Offline string
}

// NewParser returns a parser of a call to model. Its events carry tokens and
// the model; the engine prices them.
func NewParser(model string) *Parser {
	return &Parser{model: model}
}

// Feed reads one line of stdout and returns the usage it adds.
func (p *Parser) Feed(b []byte) ([]budget.UsageEvent, error) {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("codex: unreadable output line: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch l.Type {
	case "thread.started":
		p.Thread = l.ThreadID
	case "turn.completed":
		p.Done = true
		if l.Usage != nil {
			total := plus(p.turnsBase, *l.Usage)
			p.turnsBase = total
			return p.observeLocked(total), nil
		}
	case "turn.failed":
		if l.Error != nil {
			p.Failed = l.Error.Message
		}
	case "error":
		if strings.HasPrefix(l.Message, "Reconnecting") {
			p.Retries++
			if strings.Contains(l.Message, "waiting for network") && p.Offline == "" {
				p.Offline = l.Message
			}
		}
	case "item.completed":
		if l.Item != nil && l.Item.Type == "agent_message" {
			p.Text = l.Item.Text
		}
	}
	return nil, nil
}

func plus(a, b Usage) Usage {
	return Usage{Input: a.Input + b.Input, Cached: a.Cached + b.Cached, CacheWrite: a.CacheWrite + b.CacheWrite,
		Output: a.Output + b.Output, Reasoning: a.Reasoning + b.Reasoning}
}

// observeLocked takes a thread total and emits what it adds to what was
// emitted.
func (p *Parser) observeLocked(total Usage) []budget.UsageEvent {
	var delta budget.UsageEvent
	delta, p.emitted = usagedelta.Grow(p.emitted, total.event(p.model))
	if delta.Tokens() == 0 {
		return nil
	}
	return []budget.UsageEvent{delta}
}

// rolloutTotal reads a rollout line's running total, if it has one.
func rolloutTotal(b []byte) (Usage, bool) {
	var l struct {
		Type    string `json:"type"`
		Payload struct {
			Type string `json:"type"`
			Info *struct {
				Total *Usage `json:"total_token_usage"`
			} `json:"info"`
		} `json:"payload"`
	}
	if json.Unmarshal(b, &l) != nil || l.Type != "event_msg" || l.Payload.Type != "token_count" || l.Payload.Info == nil || l.Payload.Info.Total == nil {
		return Usage{}, false
	}
	return *l.Payload.Info.Total, true
}

// FeedRollout reads one line of the rollout file, which Codex writes after
// every model call (and which survives a kill), and returns what it adds.
// When no model was asked for, the model the rollout's turn context names
// is the one the tokens are priced at.
func (p *Parser) FeedRollout(b []byte) []budget.UsageEvent {
	if model := rolloutModel(b); model != "" {
		p.mu.Lock()
		if p.model == "" {
			p.model = model
		}
		p.mu.Unlock()
		return nil
	}
	total, ok := rolloutTotal(b)
	if !ok {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.observeLocked(total)
}

// rolloutModel reads the model a rollout line's turn context names, if any.
func rolloutModel(b []byte) string {
	var l struct {
		Type    string `json:"type"`
		Payload struct {
			Model string `json:"model"`
		} `json:"payload"`
	}
	if json.Unmarshal(b, &l) != nil || l.Type != "turn_context" {
		return ""
	}
	return strings.TrimSpace(l.Payload.Model)
}

// Recover reads a whole rollout file and returns what the stream had not
// reported.
func (p *Parser) Recover(rollout []byte) []budget.UsageEvent {
	var evs []budget.UsageEvent
	for _, l := range bytes.Split(rollout, []byte("\n")) {
		evs = append(evs, p.FeedRollout(l)...)
	}
	return evs
}

// state returns what Call needs after the run, under the lock.
func (p *Parser) state() (thread, failed, text string, done bool, retries int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Thread, p.Failed, p.Text, p.Done, p.Retries
}

// Options are the backend's settings in a task or purser.yaml.
type Options struct {
	proc.CLIOptions `yaml:",inline"` // command (default codex) and env
	// SandboxMode is Codex's own sandbox, passed as --sandbox (default
	// workspace-write). Its key is sandbox:, which on every other backend is
	// Purser's box: the values do not overlap, so the loader reads off, on
	// and the mapping as Purser's box and read-only, workspace-write and
	// danger-full-access as this (backend.HasOption). In Purser's box,
	// Codex's own sandbox is turned off (danger-full-access), and the
	// call's note says why: it is bubblewrap too, and a box allows no user
	// namespace inside it ("bwrap: No permissions to create new
	// namespace"); the box is the boundary.
	SandboxMode string `yaml:"sandbox"`
	// Args are extra arguments before the prompt, e.g. approval settings.
	Args []string `yaml:"args"`
	// Provider is the model provider of Codex's config whose own retries
	// Purser switches off (request_max_retries and stream_max_retries set to
	// 0 with -c); default: the config's model_provider, when the config
	// defines it. Codex refuses such settings for its built-in providers
	// (openai, ollama, lmstudio, oss): their retries stay, and are counted.
	Provider string `yaml:"provider"`
}

// Sandboxes are the values Codex's --sandbox takes.
var Sandboxes = []string{"read-only", "workspace-write", "danger-full-access"}

// NewOptions returns the backend's options with their defaults, for the
// config loader.
func NewOptions() backend.Options {
	o := defaultOptions()
	return &o
}

func defaultOptions() Options {
	return Options{CLIOptions: proc.CLIOptions{Command: "codex"}, SandboxMode: "workspace-write"}
}

// Validate checks the options' values.
func (o Options) Validate() error {
	errs := []error{o.CLIOptions.Validate()}
	if !slices.Contains(Sandboxes, o.SandboxMode) {
		errs = append(errs, &backend.OptionError{Option: "sandbox", Msg: fmt.Sprintf("%q: want %s (Codex's own), or on, off or a mapping (Purser's box)", o.SandboxMode, strings.Join(Sandboxes, ", "))})
	}
	return errors.Join(errs...)
}

// Backend runs Codex.
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

// codexHome is the CODEX_HOME of the user's Codex: its config.
func (b *Backend) codexHome() string {
	if h := b.cli.Env["CODEX_HOME"]; h != "" {
		return h
	}
	if h := os.Getenv("CODEX_HOME"); h != "" {
		return h
	}
	return filepath.Join(b.cli.Home(), ".codex")
}

// sessionsHome is the CODEX_HOME Codex runs with for task id, where its
// rollouts are: in Purser's box, .codex under the task's own HOME (the
// user's config copied there each call); otherwise codexHome.
func (b *Backend) sessionsHome(id string) string {
	if b.cli.Boxed() {
		return filepath.Join(b.cli.HomeFor(id), ".codex")
	}
	return b.codexHome()
}

// Needs are the names of Purser's environment Codex needs in a box: its
// API keys, and the env_key of the model provider its config names; of the
// keys only the door's scoped token enters (keys).
func (b *Backend) needs() []string {
	return append([]string{"OPENAI_BASE_URL"}, b.keys().Names...)
}

// keys are where Codex reads its provider's key: the env_key of the
// provider the door stands in front of (Codex sends it as Authorization:
// Bearer); OPENAI_API_KEY, CODEX_API_KEY and the other providers' env_keys
// stay out of its environment once the door holds it.
func (b *Backend) keys() proc.Credentials {
	var cfg struct {
		ModelProviders map[string]struct {
			EnvKey string `toml:"env_key"`
		} `toml:"model_providers"`
	}
	_, _ = toml.DecodeFile(filepath.Join(b.codexHome(), "config.toml"), &cfg)
	c := proc.Credentials{Also: []string{"OPENAI_API_KEY", "CODEX_API_KEY"}}
	id, _ := b.provider()
	for _, pid := range slices.Sorted(maps.Keys(cfg.ModelProviders)) {
		switch k := cfg.ModelProviders[pid].EnvKey; {
		case k == "":
		case pid == id:
			c.Names = append(c.Names, k)
		case !slices.Contains(c.Also, k):
			c.Also = append(c.Also, k)
		}
	}
	if id == "" {
		// A built-in provider: the door cannot front it, and these are the
		// keys Codex would read.
		c.Names, c.Also = c.Also, nil
	}
	return c
}

// EnvNames are the names that enter Codex's box: the options' env: and the
// token standing in for its key (purser check lists them).
func (o *Options) EnvNames() []string {
	b := &Backend{cli: o.CLIOptions, opts: *o}
	return o.CLIOptions.BoxEnvNames(b.needs(), b.keys())
}

// DoorKey says which key the door holds for Codex, by name only.
func (b *Backend) DoorKey() string {
	upstream, why := b.upstreamWhy()
	return b.cli.KeyLine(b.keys(), upstream, why)
}

// boxNote says, for a call in Purser's box, that Codex's own sandbox is
// off, and why.
const boxNote = "Codex's own sandbox is off (--sandbox danger-full-access) inside Purser's box: it is bubblewrap too, and the box allows no namespace inside it; the box is the boundary"

// rolloutPoll is how often the rollout file is read while Codex runs.
const rolloutPoll = 100 * time.Millisecond

// Call runs one `codex exec`, the prompt on stdin. While it runs, its rollout
// file is followed, so usage arrives after every model call, not only when
// the turn ends: a hard cap can stop Codex mid-turn.
func (b *Backend) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	p := NewParser(req.Model)
	var subs *subAgentFollower // subagents.go: started with the call's report (Also)
	defer func() {
		if subs != nil {
			subs.stop()
		}
	}()
	// Codex's built-in providers are not metered: only a provider its
	// config defines with a base_url can be given the meter's (-c).
	id, _ := b.provider()
	upstream, why := b.upstreamWhy()
	var seed map[string]string
	if b.cli.Boxed() {
		seed = map[string]string{".codex/config.toml": filepath.Join(b.codexHome(), "config.toml")}
	}
	return b.cli.Call(ctx, req, report, proc.CLICall{
		Backend:   "codex",
		Upstream:  upstream,
		Unmetered: why,
		Needs:     b.needs(),
		Keys:      b.keys(),
		Seed:      seed,
		Command: func(wire *proc.WireMeter) (proc.Command, string) {
			if b.cli.Boxed() {
				return b.command(req, id, wire), boxNote
			}
			return b.command(req, id, wire), ""
		},
		Feed:    p.Feed,
		Retries: func() int { _, _, _, _, retries := p.state(); return retries },
		// Codex waits for the network without end: Purser gives up on the
		// call at its first "waiting for network", and retries by its
		// policy.
		GiveUp: func() error {
			if offline := p.offline(); offline != "" {
				return &proc.FaultError{Backend: "codex", Fault: proc.FaultRefused, Detail: redact.String(offline)}
			}
			return nil
		},
		Follow: &proc.FollowSession{Find: func() string { return b.rollout(req.TaskID, p) }, Feed: p.FeedRollout, Every: rolloutPoll},
		Also:   func(report purser.UsageFunc) { subs = b.followSubAgents(req, p, report) },
		Finish: func(out proc.Outcome, parseErr error, recovered int, _ purser.UsageFunc, res *purser.CallResult) error {
			subs.finish()
			_, failed, text, done, retries := p.state()
			res.Text = text
			if !done && recovered > 0 {
				res.Note = purser.JoinNotes(res.Note, "no turn.completed; usage recovered from the rollout file")
			}
			if retries > 0 {
				res.Note = purser.JoinNotes(res.Note, fmt.Sprintf("%d reconnects inside Codex", retries))
			}
			switch {
			case failed != "":
				return Classify(failed)
			case !done:
				return out.Unfinished("codex", "codex exited without completing its turn", parseErr)
			}
			return nil
		},
	})
}

// command is the `codex exec` of a call, through the wire meter (nil: not
// metered) that stands in front of the provider its config names id.
func (b *Backend) command(req purser.CallRequest, id string, wire *proc.WireMeter) proc.Command {
	args := []string{"exec", "--json", "--skip-git-repo-check"}
	switch {
	case b.cli.Boxed():
		args = append(args, "--sandbox", "danger-full-access") // boxNote
	case b.opts.SandboxMode != "":
		args = append(args, "--sandbox", b.opts.SandboxMode)
	}
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}
	var wireArgs []string
	if wire != nil {
		wireArgs = []string{"-c", fmt.Sprintf("model_providers.%s.base_url=%q", id, wire.URL())}
	}
	args = append(append(append(args, b.retryArgs()...), wireArgs...), b.opts.Args...)
	args = append(args, "-")
	// Should Purser die, the supervisor interrupts Codex at once (SIGINT,
	// then SIGKILL 1 s later): only then does Codex write the usage of the
	// reply it holds to its rollout, for the resume to recover; a wait
	// before it lets more replies arrive that it does not write down
	// (docs/reliability.md).
	env := append(b.cli.Environ(procgroup.GraceEnv+"=INT 1000"), wire.Env()...)
	if b.cli.Boxed() {
		env = append(env, "CODEX_HOME="+b.sessionsHome(req.TaskID))
	}
	return proc.Command{Args: args, Env: env, Stdin: strings.NewReader(req.Prompt), Interrupt: syscall.SIGINT, Grace: StopGrace}
}

// rollout is the call's rollout file, once Codex has named its thread and
// written the file ("" until then).
func (b *Backend) rollout(task string, p *Parser) string {
	thread, _, _, _, _ := p.state()
	if thread == "" {
		return ""
	}
	m, _ := filepath.Glob(filepath.Join(b.sessionsHome(task), "sessions", "*", "*", "*", "rollout-*"+thread+".jsonl"))
	if len(m) == 0 {
		return ""
	}
	return m[0]
}

// Classify tells the fault of a failed turn from Codex's words.
func Classify(failed string) error {
	return &proc.FaultError{Backend: "codex", Fault: proc.TextFault(failed), Detail: "turn failed: " + redact.String(failed)}
}

// offline returns Codex's "waiting for network" message, if it said one.
func (p *Parser) offline() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Offline
}

// bareKey is a TOML key that needs no quotes.
var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// builtinProviders are Codex's own model providers, whose settings its
// config may not override.
var builtinProviders = []string{"openai", "ollama", "lmstudio", "oss"}

// provider is the model provider Codex uses, when its settings may be
// overridden with -c (one its config defines, named by a bare key), and the
// base URL its config gives it ("" for none).
func (b *Backend) provider() (id, baseURL string) {
	var cfg struct {
		ModelProvider  string `toml:"model_provider"`
		ModelProviders map[string]struct {
			BaseURL string `toml:"base_url"`
		} `toml:"model_providers"`
	}
	_, err := toml.DecodeFile(filepath.Join(b.codexHome(), "config.toml"), &cfg)
	id = b.opts.Provider
	if id == "" && err == nil {
		if _, ok := cfg.ModelProviders[cfg.ModelProvider]; ok {
			id = cfg.ModelProvider
		}
	}
	// Codex splits a -c key at its dots and takes no quoting: an id with
	// other characters cannot be named there.
	if id == "" || slices.Contains(builtinProviders, id) || !bareKey.MatchString(id) {
		return "", ""
	}
	return id, cfg.ModelProviders[id].BaseURL
}

// retryArgs switch off Codex's own retries for the provider it uses, where
// Codex allows it: -c settings of a provider its config defines.
func (b *Backend) retryArgs() []string {
	id, _ := b.provider()
	if id == "" {
		return nil
	}
	key := "model_providers." + id
	return []string{"-c", key + ".request_max_retries=0", "-c", key + ".stream_max_retries=0"}
}

// Metering says whether the calls are metered at the wire, and where to.
func (b *Backend) Metering() string { return b.cli.Metering(b.upstreamWhy()) }

// upstreamWhy is the base URL the door stands in front of, or "" and why
// it cannot.
func (b *Backend) upstreamWhy() (upstream, why string) {
	id, upstream := b.provider()
	switch {
	case id == "":
		return "", "Codex uses a built-in provider (openai, ollama, …), whose base URL it lets no -c setting change"
	case upstream == "":
		return "", fmt.Sprintf("model provider %q has no base_url in %s", id, filepath.Join(b.codexHome(), "config.toml"))
	}
	return upstream, ""
}

var _ purser.SpendRecoverer = (*Backend)(nil)

// RecoverSpend reads a call's rollout file, whose running total Codex
// writes after every model call, and returns what it holds beyond the
// ledger. A call killed before its rollout was found is located among
// $CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl by the rollout's first
// line (session_meta), which names the directory Codex ran in and when the
// session started: the workspace's, at or after the call's start
// (proc.LocateSession).
func (b *Backend) RecoverSpend(_ context.Context, q purser.SpendQuery) (purser.RecoveredSpend, error) {
	file, note := q.Call.Session, ""
	if file == "" {
		file, note = proc.LocateSession(q, []string{filepath.Join(b.sessionsHome(q.Call.TaskID), "sessions", "*", "*", "*", "rollout-*.jsonl")}, rolloutHead)
		note = "rollout file: " + note
	}
	file, note = proc.Gone(q, "rollout file", file, note)
	return proc.RecoverFrom(q, "codex", file, note, NewParser(q.Call.Model).FeedRollout, false)
}

// rolloutHead reads a rollout's session_meta line: when the session
// started, and in which directory.
func rolloutHead(_ string, lines [][]byte) (time.Time, string) {
	for _, l := range lines {
		var m struct {
			Type    string `json:"type"`
			Payload struct {
				Timestamp time.Time `json:"timestamp"`
				Cwd       string    `json:"cwd"`
			} `json:"payload"`
		}
		if json.Unmarshal(l, &m) == nil && m.Type == "session_meta" {
			return m.Payload.Timestamp, m.Payload.Cwd
		}
	}
	return time.Time{}, ""
}
