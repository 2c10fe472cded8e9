// Package agent budgets any agent CLI that takes its provider's base URL
// and API key from its environment (`type: agent`): Purser opens a lane of
// its door (package gateway) for each call, gives the agent the door's URL
// and a scoped token in place of the real key, and books usage only from
// what crosses the door. The agent's own extra requests (titles,
// sub-agents, retries, compaction) are counted like the rest; with
// `sandbox: on` the door is the box's only way out. See docs/gateway.md.
package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/meter"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/gateway"
	"github.com/purser-dev/purser/sandbox"
)

// StopGrace is how long the agent has after SIGTERM before SIGKILL.
const StopGrace = 500 * time.Millisecond

// boxPort is the port inside a box that reaches the door.
const boxPort = 4141

// journalAge is how long a wire journal is kept (see backend/proc).
const journalAge = 30 * 24 * time.Hour

var pruneOnce sync.Once

// Options are the backend's settings (docs/gateway.md has the table).
type Options struct {
	Wire        string            `yaml:"wire"`
	Command     []string          `yaml:"command"`
	PromptStdin bool              `yaml:"promptStdin"`
	Model       string            `yaml:"model"`
	Upstream    string            `yaml:"upstream"`
	Key         map[string]string `yaml:"key"`
	BaseURLEnv  []string          `yaml:"baseURLEnv"`
	KeyEnv      []string          `yaml:"keyEnv"`
	Env         map[string]string `yaml:"env"`

	backend.BoxSetting `yaml:"-"`
}

// NewOptions returns the backend's options, for the config loader.
func NewOptions() backend.Options { return &Options{} }

var _ backend.Boxable = (*Options)(nil)

// BoxNetwork says what network the agent has in a box, for purser check:
// a lane of the door per call, relayed into the box.
func (o *Options) BoxNetwork() string {
	return "only Purser's door, 127.0.0.1:PORT inside relayed to the call's gateway lane, which holds the key; no DNS, no other route"
}

// EnvNames are the names that enter the box besides the allow-list, for
// purser check: env:'s, the base-URL and token variables.
func (o *Options) EnvNames() []string {
	names := slices.Collect(maps.Keys(o.Env))
	base, keys := o.BaseURLEnv, o.KeyEnv
	if len(base) == 0 {
		base = defaultBaseURLEnv(o.Wire)
	}
	if len(keys) == 0 {
		keys = []string{defaultKeyEnv(o.Wire)}
	}
	names = append(append(append(names, base...), keys...), "PURSER_MODEL")
	slices.Sort(names)
	return slices.Compact(names)
}

// Validate checks the values alone.
func (o Options) Validate() error {
	if !gateway.KnownProtocol(o.Wire) {
		return &backend.OptionError{Option: "wire", Msg: fmt.Sprintf("want one of %s, got %q", strings.Join(gateway.Protocols, ", "), o.Wire)}
	}
	if len(o.Command) == 0 || strings.TrimSpace(o.Command[0]) == "" {
		return &backend.OptionError{Option: "command", Msg: "is required: [program, args...]"}
	}
	if _, err := o.key(); err != nil {
		return &backend.OptionError{Option: "key", Msg: err.Error()}
	}
	if o.Upstream != "" && !strings.HasPrefix(o.Upstream, "http://") && !strings.HasPrefix(o.Upstream, "https://") {
		return &backend.OptionError{Option: "upstream", Msg: "want an http or https URL"}
	}
	return proc.CLIOptions{Command: o.Command[0], Env: o.Env}.Validate()
}

// Check finds the program and the key on this machine, by name only.
func (o Options) Check(dir string) error {
	if _, err := proc.FindCommand(o.argv(dir)[0]); err != nil {
		return &backend.OptionError{Option: "command[0]", Msg: err.Error(), Err: err}
	}
	k, _ := o.key()
	switch {
	case k.Env != "" && os.Getenv(k.Env) == "" && gateway.ServiceSocket() != "":
		// The door's service (purser gateway) holds the keys: it is asked,
		// by name, whether it has this one.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := gateway.ServiceHasKey(ctx, gateway.ServiceSocket(), k); err != nil {
			return &backend.OptionError{Option: "key", Msg: fmt.Sprintf("$%s is not set in Purser's environment, and the door's service at %s does not hold it: %v", k.Env, gateway.ServiceSocket(), err), Err: err}
		}
	case k.Env != "" && os.Getenv(k.Env) == "":
		return &backend.OptionError{Option: "key", Msg: "$" + k.Env + " is not set in Purser's environment"}
	case k.File != "":
		if _, err := os.Stat(k.File); err != nil {
			return &backend.OptionError{Option: "key.file", Msg: err.Error(), Err: err}
		}
	}
	if o.Sandbox().On() {
		for _, name := range slices.Sorted(maps.Keys(o.Env)) {
			if sandbox.Forbidden(name) {
				return &backend.OptionError{Option: "env." + name, Msg: "never enters the agent's box (sandbox: on)"}
			}
		}
	}
	return nil
}

// key is where the real key is: the key: option, else the wire's default.
func (o Options) key() (gateway.Key, error) {
	if len(o.Key) == 0 {
		return gateway.Key{Env: defaultKeyEnv(o.Wire)}, nil
	}
	env, file := o.Key["env"], o.Key["file"]
	for k := range o.Key {
		if k != "env" && k != "file" {
			return gateway.Key{}, fmt.Errorf("want {env: NAME} or {file: /path}, not %s", k)
		}
	}
	if (env == "") == (file == "") {
		return gateway.Key{}, errors.New("want exactly one of {env: NAME} or {file: /path}")
	}
	return gateway.Key{Env: env, File: file}, nil
}

// argv is the command with its program's path resolved against dir.
func (o Options) argv(dir string) []string {
	argv := slices.Clone(o.Command)
	if p := argv[0]; !filepath.IsAbs(p) && strings.Contains(p, "/") {
		argv[0] = filepath.Join(dir, p)
	}
	return argv
}

func defaultKeyEnv(wire string) string {
	switch wire {
	case gateway.Anthropic:
		return "ANTHROPIC_API_KEY"
	case gateway.Gemini:
		return "GEMINI_API_KEY"
	}
	return "OPENAI_API_KEY"
}

func defaultBaseURLEnv(wire string) []string {
	switch wire {
	case gateway.Anthropic:
		return []string{"ANTHROPIC_BASE_URL"}
	case gateway.Gemini:
		return []string{"GOOGLE_GEMINI_BASE_URL", "GEMINI_BASE_URL"}
	}
	return []string{"OPENAI_BASE_URL"}
}

// Backend runs an agent behind the door.
type Backend struct {
	o    Options
	argv []string
	key  gateway.Key
	dir  string
	term *Terminal // set for an interactive session (Interactive)
}

var (
	_ purser.Backend = (*Backend)(nil)
	_ purser.Metered = (*Backend)(nil)
)

// New reads a backend spec's options and finds the program.
func New(spec purser.BackendSpec) (*Backend, error) {
	var o Options
	if err := backend.DecodeChecked(spec, &o); err != nil {
		return nil, err
	}
	k, _ := o.key()
	if k.File != "" && !filepath.IsAbs(k.File) {
		k.File = filepath.Join(spec.Dir, k.File)
	}
	if len(o.BaseURLEnv) == 0 {
		o.BaseURLEnv = defaultBaseURLEnv(o.Wire)
	}
	if len(o.KeyEnv) == 0 {
		o.KeyEnv = []string{defaultKeyEnv(o.Wire)}
	}
	if o.Upstream == "" {
		o.Upstream = gateway.DefaultUpstream(o.Wire)
	}
	return &Backend{o: o, argv: o.argv(spec.Dir), key: k, dir: spec.Dir}, nil
}

// Metering names the door, its protocol and upstream, and the key by name.
func (b *Backend) Metering() string {
	box := ""
	if b.o.Sandbox().On() {
		box = "; the box's only way out"
	}
	return fmt.Sprintf("Purser's door (gateway) on 127.0.0.1, %s, in front of %s; holds the key %s, the agent gets a scoped token in %s%s",
		b.o.Wire, b.o.Upstream, b.key.Name(), strings.Join(b.o.KeyEnv, ", "), box)
}

// Call runs the agent once, behind a lane of the door.
func (b *Backend) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	model := req.Model
	if model == "" {
		model = b.o.Model
	}
	dir := meter.Dir()
	pruneOnce.Do(func() { meter.Prune(dir, journalAge) })
	journal := meter.NewJournal(dir, "agent")
	// The call's MaxOutputTokens bounds one request's reply; a lane's cap
	// is a total over all of them. With per-request admission the engine
	// bounds each request itself, and that total would stop a long agent
	// after its first few thousand tokens of output: it is kept only where
	// nothing admits each request.
	outCap := req.MaxOutputTokens
	if req.Hooks.Admit != nil {
		outCap = 0
	}
	lane, err := gateway.Open(ctx, gateway.LaneConfig{Task: req.TaskID, Protocol: b.o.Wire, Upstream: b.o.Upstream, Key: b.key,
		Model: model, Report: report, Admit: req.Hooks.Admit, Journal: journal, MaxOutputTokens: outCap})
	if err != nil {
		return purser.CallResult{}, fmt.Errorf("agent: %w", err)
	}
	req.Hooks.Wire(journal)
	closeLane := func() string {
		err := lane.Close()
		if ctx.Err() == nil {
			_ = os.Remove(journal) // every reply was booked live; nothing to recover
		}
		if err != nil {
			return err.Error()
		}
		return ""
	}

	l, err := b.command(ctx, req, model, lane)
	if err != nil {
		closeLane()
		return purser.CallResult{}, fmt.Errorf("agent: %w", err)
	}
	defer l.cleanup()
	if b.term != nil {
		out, err := b.interact(ctx, l, req.Workspace, req.Hooks.Started)
		note := purser.JoinNotes(closeLane(), b.note(lane.Stats()))
		switch {
		case err != nil:
			return purser.CallResult{}, fmt.Errorf("agent: %w", err)
		case out.stopped:
			return purser.CallResult{Note: note}, context.Cause(ctx)
		case out.waitErr != nil:
			// Never a transient fault: a retry would start the user's
			// session over on their terminal.
			return purser.CallResult{Note: note}, fmt.Errorf("agent: %s (interactive): %w", filepath.Base(b.argv[0]), out.waitErr)
		}
		return purser.CallResult{Note: note}, nil
	}
	var output strings.Builder
	out, err := proc.Run(ctx, proc.Command{Path: l.path, Started: req.Hooks.Started, Args: l.args, Dir: req.Workspace, Env: l.env,
		Stdin: l.stdin, Interrupt: syscall.SIGTERM, Grace: StopGrace, Stall: req.StallTimeout, Progress: lane.Carried}, func(l []byte) {
		if output.Len() < 64<<10 {
			output.Write(l)
			output.WriteByte('\n')
		}
	})
	lastErr := lane.LastError()
	st := lane.Stats()
	note := closeLane()
	if err != nil {
		return purser.CallResult{}, fmt.Errorf("agent: %w", err)
	}
	return b.result(ctx, purser.CallResult{Text: output.String(), Note: purser.JoinNotes(note, b.note(st))}, out, lastErr)
}

// result is how a call ended: its context's cause when it was stopped, a
// stall, a fault when the agent failed for want of its provider, or its
// exit status.
func (b *Backend) result(ctx context.Context, res purser.CallResult, out proc.Outcome, lastErr error) (purser.CallResult, error) {
	switch {
	case out.Stopped:
		return res, context.Cause(ctx)
	case out.Stalled:
		return res, out.Stall()
	}
	if out.WaitErr == nil {
		return res, nil
	}
	if lastErr != nil {
		f := proc.TextFault(lastErr.Error())
		if f != proc.FaultTimeout {
			f = proc.FaultRefused
		}
		return res, &proc.FaultError{Backend: "agent", Fault: f, Detail: "the provider could not be reached"}
	}
	var ee *osexec.ExitError
	if f := proc.TextFault(out.Stderr); f.Transient() && errors.As(out.WaitErr, &ee) {
		return res, &proc.FaultError{Backend: "agent", Fault: f, Detail: proc.LastLines(out.Stderr, 3)}
	}
	return res, fmt.Errorf("agent: %s: %v: %s", filepath.Base(b.argv[0]), out.WaitErr, proc.LastLines(out.Stderr, 5))
}

// note says what crossed the door.
func (b *Backend) note(st gateway.Stats) string {
	s := fmt.Sprintf("door (%s): %d request(s), %d reply(ies) booked", b.o.Wire, st.Requests, st.Booked)
	if st.Refused > 0 {
		s += fmt.Sprintf(", %d refused", st.Refused)
	}
	if st.Cut > 0 {
		s += fmt.Sprintf(", %d cut mid-reply", st.Cut)
	}
	return s
}

// launch is how the agent is started: its program, arguments,
// environment and stdin, whether it runs in a box, and what to remove once
// it has ended.
type launch struct {
	path    string
	args    []string
	env     []string
	stdin   *strings.Reader
	boxed   bool
	cleanup func()
}

// command is how to run the agent: the door's URL in every baseURLEnv
// name, the token in every keyEnv name, the real key's variable removed;
// in the box when sandbox: is on (refused when no box can be made).
func (b *Backend) command(ctx context.Context, req purser.CallRequest, model string, lane *gateway.Lane) (launch, error) {
	argv, stdin := b.expand(req, model)
	box, url, cleanup, err := b.openBox(req, lane, argv)
	if err != nil {
		return launch{}, err
	}
	set, drop := b.agentVars(url, lane.Token(), model)
	if box == nil {
		return launch{path: argv[0], args: argv[1:], env: hostEnv(set, drop, b.o.Env, req.Workspace), stdin: stdin, cleanup: cleanup}, nil
	}
	for k := range drop {
		delete(box.Env, k)
	}
	maps.Copy(box.Env, set)
	cmd, err := box.Command(ctx, argv[0], argv[1:]...)
	if err != nil {
		cleanup()
		return launch{}, err
	}
	return launch{path: cmd.Path, args: cmd.Args[1:], env: cmd.Env, stdin: stdin, boxed: true, cleanup: cleanup}, nil
}

// expand is the command with {model} and {prompt} filled in, and the
// agent's stdin: the prompt, unless only its arguments carry it.
func (b *Backend) expand(req purser.CallRequest, model string) ([]string, *strings.Reader) {
	argv := slices.Clone(b.argv)
	usesPrompt := false
	for i := 1; i < len(argv); i++ {
		if strings.Contains(argv[i], "{prompt}") {
			usesPrompt = true
		}
		argv[i] = strings.ReplaceAll(strings.ReplaceAll(argv[i], "{model}", model), "{prompt}", req.Prompt)
	}
	stdin := strings.NewReader("")
	if b.o.PromptStdin || !usesPrompt {
		stdin = strings.NewReader(req.Prompt)
	}
	return argv, stdin
}

// openBox makes the agent's box when sandbox: is on, its door served on a
// unix socket: the box, the door's URL as the agent sees it, and what to
// remove afterwards. With sandbox: off it returns no box and the lane's
// own URL.
func (b *Backend) openBox(req purser.CallRequest, lane *gateway.Lane, argv []string) (*sandbox.Box, string, func(), error) {
	sb := b.o.Sandbox()
	if !sb.On() {
		return nil, lane.URL(), func() {}, nil
	}
	if sb.Homes == "" || req.TaskID == "" {
		return nil, "", nil, errors.New("sandbox is on but no HOME can be made for the box (a backend built without the config loader, or a call without a task)")
	}
	home := filepath.Join(sb.Homes, "agent-"+req.TaskID)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, "", nil, fmt.Errorf("making the box's HOME: %w", err)
	}
	sockDir, err := sandbox.SocketDir("purser-door-", len("door.sock"))
	if err != nil {
		return nil, "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(sockDir) }
	door := &sandbox.Door{Socket: filepath.Join(sockDir, "door.sock"), Port: boxPort}
	if err := lane.ServeUnix(door.Socket); err != nil {
		cleanup()
		return nil, "", nil, err
	}
	box := &sandbox.Box{Workspace: req.Workspace, Home: home, ReadOnly: readOnly(argv[0], req.Workspace, sb.ReadOnly),
		Env: sandbox.EnvAllowList(os.Environ(), sb.Env...), Door: door, Allow: sb.Allow}
	return box, door.URL(), cleanup, nil
}

// agentVars are the variables the agent is given (env:, the door's URL,
// the scoped token, PURSER_MODEL) and those it must not see: the real
// key's, unless a keyEnv name reuses it for the token.
func (b *Backend) agentVars(url, token, model string) (set map[string]string, drop map[string]bool) {
	set = map[string]string{}
	maps.Copy(set, b.o.Env)
	base := url
	if strings.HasPrefix(b.o.Wire, "openai") {
		base += "/v1"
	}
	for _, k := range b.o.BaseURLEnv {
		set[k] = base
	}
	for _, k := range b.o.KeyEnv {
		set[k] = token
	}
	set["PURSER_MODEL"] = model
	drop = map[string]bool{}
	if b.key.Env != "" && !slices.Contains(b.o.KeyEnv, b.key.Env) {
		drop[b.key.Env] = true // the real key never reaches the agent
	}
	return set, drop
}

// hostEnv is an unboxed agent's environment: Purser's, less what drop
// names, with set over it and the door exempt from any HTTP proxy.
func hostEnv(set map[string]string, drop map[string]bool, own map[string]string, workspace string) []string {
	// $PWD is the agent's working directory, not Purser's: OpenCode takes
	// its directory from $PWD, and would work wherever purser was started.
	if _, ok := own["PWD"]; !ok {
		if ws, err := filepath.Abs(workspace); err == nil {
			set["PWD"] = ws
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := set[k]; over || drop[k] || k == "NO_PROXY" || k == "no_proxy" {
			continue
		}
		env = append(env, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		env = append(env, k+"="+set[k])
	}
	// A CLI told to use an HTTP proxy must reach the door directly.
	np := os.Getenv("NO_PROXY")
	if np != "" {
		np += ","
	}
	return append(env, "NO_PROXY="+np+"127.0.0.1,localhost", "no_proxy="+np+"127.0.0.1,localhost")
}

// readOnly is the box's read-only paths: the setting's, and the agent's
// program file when the box would not see it otherwise.
func readOnly(program, workspace string, extra []string) []string {
	out := slices.Clone(extra)
	ws := filepath.Clean(workspace) + "/"
	if filepath.IsAbs(program) && !strings.HasPrefix(program, "/usr/") && !strings.HasPrefix(program, "/bin/") &&
		!strings.HasPrefix(program, ws) && !slices.Contains(out, program) {
		out = append(out, filepath.Clean(program))
	}
	return out
}
