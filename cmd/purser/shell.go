package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/agent"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/gateway"
	"github.com/purser-dev/purser/redact"
)

// Session timings of purser shell.
const (
	// doubleInterrupt: a second Ctrl-C this soon after the first ends the
	// session; a single one is the agent's.
	doubleInterrupt = 2 * time.Second
	// shellGrace is how long the agent has, once the session is ended, to
	// show the user why (the door's refusal) before it is asked to stop.
	shellGrace = 2 * time.Second
	// shellCallTimeout bounds a session with no time cap: a week.
	shellCallTimeout = 7 * 24 * time.Hour
)

// shellFlags are purser shell's flags.
type shellFlags struct {
	db, budgetsDB, budgetFile, usd, wire, backendName, model, gateway string
	tokens                                                            int64
	time                                                              time.Duration
}

// defaultShellModel is the model a session is priced and forecast on when
// --model is not given, per wire: the agent names its own in each request,
// and the door prices each request by the model it names.
var defaultShellModel = map[string]string{
	gateway.Anthropic:       "claude-sonnet-4-5",
	gateway.OpenAIChat:      "gpt-5",
	gateway.OpenAIResponses: "gpt-5",
	gateway.Gemini:          "gemini-2.5-pro",
}

func newShellCmd() *cobra.Command {
	var f shellFlags
	cmd := &cobra.Command{
		Use:   "shell [--budget FILE | --usd X --tokens N --time D] [--wire PROTOCOL | --backend NAME] [--model M] [--db PATH] -- AGENT [ARGS...]",
		Short: "Run any agent interactively, under a session budget, through Purser's door",
		Long: `Runs AGENT on your terminal (its stdin, stdout and stderr are yours), with
its provider's base URL pointing at a lane of Purser's door and a scoped token
as its API key: the real key stays with Purser. Every model request is
admitted against the session's caps. Past the WARNING line Purser says so on
stderr once (and degrades at the wire where the project's policy says); a
request that would cross a HARD cap is refused in the provider's own error
shape, and the session ends: the agent sees the refusal, and a moment later it
is stopped (its box with it). With the project's sandbox: on (the default) the agent runs in
its box, and nothing runs where no box can be made.

The session is a task of the project's database: purser status and explain
show it, with STATUS.md and BUDGET.md in the working directory. DONE when the
agent exits 0 under its caps, BLOCKED at a HARD cap, FAILED when the agent
fails.

Ctrl-C is the agent's; a second Ctrl-C within 2 s, or SIGTERM, ends the
session. --usd, --tokens and --time are hard caps, with the WARNING line at
80 % of each; a budget file (--budget) gives all three tiers.

Exit codes: 0 DONE; 3 BLOCKED by the budget; 1 the agent failed; 2 bad input
(nothing was run); 130 ended by a signal.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return badInput(fmt.Errorf("shell needs the agent to run: purser shell [flags] -- AGENT [ARGS...]"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runShell(cmd, f, args) },
	}
	cmd.Flags().SetInterspersed(false) // everything from AGENT on is the agent's
	fl := cmd.Flags()
	fl.StringVar(&f.db, "db", "", app.DBFlagHelp)
	fl.StringVar(&f.budgetsDB, "budgets-db", "", app.BudgetsDBFlagHelp)
	fl.StringVar(&f.gateway, "gateway", "", app.GatewayFlagHelp)
	fl.StringVar(&f.budgetFile, "budget", "", "the session's budget file (YAML or JSON): optimal/warning/hard")
	fl.StringVar(&f.usd, "usd", "", "instead of --budget: the session's hard cap on money, in dollars")
	fl.Int64Var(&f.tokens, "tokens", 0, "instead of --budget: the session's hard cap on tokens")
	fl.DurationVar(&f.time, "time", 0, "instead of --budget: the session's hard cap on time, e.g. 30m")
	fl.StringVar(&f.wire, "wire", "", "the protocol the agent speaks: "+strings.Join(gateway.Protocols, ", ")+" (openai: openai-chat; default anthropic; not with --backend)")
	fl.StringVar(&f.backendName, "backend", "", "a type: agent backend of purser.yaml whose wire, upstream, key, env and sandbox the session takes (its command is AGENT)")
	fl.StringVar(&f.model, "model", "", "the model the session is priced and forecast on before its first request (default per wire; each request is priced by the model it names)")
	return cmd
}

// runShell runs one interactive session as a task of the project.
func runShell(cmd *cobra.Command, f shellFlags, argv []string) error {
	cfg, err := f.budget(cmd)
	if err != nil {
		return err
	}
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	proj, err := config.Loader{Backends: backendTypes()}.FindProject(dir)
	if err != nil {
		return badInput(err)
	}
	if err := useGateway(cmd, f.gateway, proj); err != nil {
		return err
	}
	task, err := shellTask(f, proj, cfg, dir, argv)
	if err != nil {
		return badInput(err)
	}
	ctx, end := context.WithCancelCause(cmd.Context())
	defer end(nil)
	toAgent := shellSignals(cmd.ErrOrStderr(), end)
	term := &agent.Terminal{Stdin: cmd.InOrStdin(), Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(),
		TTY: isTerminal(cmd.InOrStdin()), Signals: toAgent, Grace: shellGrace}
	a, err := app.Open(cmd.Context(), app.Options{DB: f.db, BudgetsDB: f.budgetsDB, Project: proj, Create: true, Backends: shellBackends(term), LoadTask: loadTask,
		Stderr: cmd.ErrOrStderr(), Preflight: app.Preflight{Tasks: []purser.Task{task}, Draws: true, Alerts: true, Unpriced: true}})
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.StartAlerts(ctx, proj, []purser.Task{task}); err != nil {
		return err
	}
	defer a.EndAlerts()
	observe, stopWarning := shellObserver(cmd.ErrOrStderr(), task.Budget)
	defer stopWarning()
	e, err := a.NewEngine(app.EngineOptions{Observe: observe, Prices: proj.Prices, Tasks: []purser.Task{task}})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "purser: session %s: %s through Purser's door (%s)%s; a second Ctrl-C within %s ends it\n",
		task.ID, filepath.Base(argv[0]), budgetLine(task.Budget), boxedLine(task), doubleInterrupt)
	outcomes, err := e.RunBatch(ctx, engine.Batch{Tasks: []purser.Task{task}, Parallel: 1})
	stopWarning()
	a.EndAlerts()
	if err != nil {
		return requestError(err)
	}
	return runOutcome(cmd, a.Store, "", true, []purser.Task{task}, outcomes)
}

// budget is the session's budget: the file's, or the caps of the flags
// with the WARNING line at 80 % of each.
func (f shellFlags) budget(cmd *cobra.Command) (budget.Config, error) {
	caps := f.usd != "" || cmd.Flags().Changed("tokens") || cmd.Flags().Changed("time")
	var cfg budget.Config
	switch {
	case f.budgetFile != "" && caps:
		return cfg, badInput(errors.New("--budget and --usd/--tokens/--time: give the session's budget one way"))
	case f.budgetFile != "":
		c, err := config.LoadBudget(f.budgetFile)
		if err != nil {
			return cfg, badInput(fmt.Errorf("--budget %s: %w", f.budgetFile, err))
		}
		cfg = c
	case !caps:
		return cfg, badInput(errors.New("a session needs a budget: --budget FILE, or a hard cap (--usd X, --tokens N, --time D)"))
	default:
		c, err := f.caps(cmd)
		if err != nil {
			return cfg, badInput(err)
		}
		cfg = c
	}
	if cfg.Hard.MaxIterations == nil {
		// The session is one iteration, DONE when the agent exits 0 (it
		// has no validators); a cap of 1 would show the session at HARD
		// from its start, so the cap is 2, never reached.
		two := 2
		cfg.Hard.MaxIterations = &two
	}
	if err := cfg.Validate(); err != nil {
		return cfg, badInput(fmt.Errorf("the session's budget: %w", err))
	}
	return cfg, nil
}

// caps are the flags' hard caps, each with its WARNING line at 80 %.
func (f shellFlags) caps(cmd *cobra.Command) (budget.Config, error) {
	cfg, err := hardCaps(f.usd, f.tokens, cmd.Flags().Changed("tokens"))
	if err != nil {
		return cfg, err
	}
	if u := cfg.Hard.USD; u != nil {
		w := *u / 10 * 8
		cfg.Warning.USD = &w
	}
	if t := cfg.Hard.Tokens; t != nil {
		w := *t * 8 / 10
		cfg.Warning.Tokens = &w
	}
	if cmd.Flags().Changed("time") {
		if f.time < time.Minute/60 {
			return cfg, fmt.Errorf("--time %s: want a duration of at least a second, e.g. 30m", f.time)
		}
		h, w := budget.Minutes(f.time), budget.Minutes(f.time/10*8)
		cfg.Hard.TimeMinutes, cfg.Warning.TimeMinutes = &h, &w
	}
	return cfg, nil
}

// shellTask is the session as a task: the agent in the working directory
// on a type: agent backend (purser.yaml's --backend, or one of --wire with
// the project's sandbox: setting), no validators (the agent's exit 0 is
// DONE), the project's degrade policy and named budgets.
func shellTask(f shellFlags, proj *config.Project, cfg budget.Config, dir string, argv []string) (purser.Task, error) {
	spec, err := shellBackend(f, proj, dir, argv)
	if err != nil {
		return purser.Task{}, err
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	t := purser.Task{ID: "shell-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(suffix),
		Goal: "interactive session (purser shell): " + filepath.Base(argv[0]), Workspace: dir, Backend: spec,
		ModelTier: "standard", Budget: cfg, Degrade: purser.DefaultDegradePolicy(), DrawFrom: proj.DrawFrom}
	if proj.Degrade != nil {
		t.Degrade = *proj.Degrade
	}
	return t, nil
}

// shellBackend is the session's backend: a type: agent one running argv.
func shellBackend(f shellFlags, proj *config.Project, dir string, argv []string) (purser.BackendSpec, error) {
	var opts agent.Options
	var spec purser.BackendSpec
	if f.backendName != "" {
		if f.wire != "" {
			return spec, errors.New("--wire and --backend: the backend names its wire; give one")
		}
		named, ok := proj.Backends[f.backendName]
		o, isAgent := named.Options.(*agent.Options)
		switch {
		case !ok:
			return spec, fmt.Errorf("--backend %q is not a backend of the project (%s)", f.backendName, projectFileOf(proj))
		case !isAgent:
			return spec, fmt.Errorf("--backend %q is of type %s; purser shell runs a type: agent backend (any agent behind the door)", f.backendName, named.Type)
		}
		spec, opts = named, *o
		spec.Options = nil
	} else {
		switch opts.Wire = f.wire; opts.Wire {
		case "":
			opts.Wire = gateway.Anthropic
		case "openai":
			opts.Wire = gateway.OpenAIChat // the route most agents take
		}
		opts.SetSandbox(backend.SandboxConfig{Setting: proj.Sandbox.Resolved(), Homes: config.BoxHomes(proj.Dir)})
		spec = purser.BackendSpec{Name: "shell", Type: "agent", Dir: dir}
	}
	opts.Command = argv
	if f.model != "" {
		opts.Model = f.model
	} else if opts.Model == "" {
		opts.Model = defaultShellModel[opts.Wire]
	}
	if err := opts.Validate(); err != nil {
		return spec, flagError(err)
	}
	if err := opts.Check(dir); err != nil {
		return spec, flagError(err)
	}
	spec.Options = &opts
	if len(spec.Models) == 0 || f.model != "" {
		spec.Models = map[string]string{"standard": opts.Model}
	}
	// A session is one call: its time cap bounds it through the engine's
	// hard deadline; silence is the user thinking, never a stall.
	spec.CallTimeout, spec.StallTimeout = shellCallTimeout, -1
	return spec, nil
}

// flagError names the flag behind a backend option's problem.
func flagError(err error) error {
	var oe *backend.OptionError
	if errors.As(err, &oe) {
		switch oe.Option {
		case "wire":
			return fmt.Errorf("--wire: %s", oe.Msg)
		case "command", "command[0]":
			return fmt.Errorf("the agent: %s", oe.Msg)
		}
	}
	return err
}

// projectFileOf names the project's file, for an error.
func projectFileOf(proj *config.Project) string {
	if proj.File == "" {
		return "no purser.yaml was found"
	}
	return proj.File
}

// shellBackends resolves the session's type: agent backend onto the
// terminal; every other type as purser run would.
func shellBackends(term *agent.Terminal) engine.BackendResolver {
	inner := backends()
	return func(spec purser.BackendSpec) (purser.Backend, error) {
		if spec.Type != "agent" {
			return inner(spec)
		}
		b, err := agent.New(spec)
		if err != nil {
			return nil, err
		}
		b.Interactive(term)
		return b, nil
	}
}

// shellSignals takes the signals from main's handler: Ctrl-C is the
// agent's (returned, to pass on), a second one within doubleInterrupt
// ends the session, as does SIGTERM or SIGHUP; a window resize is the
// agent's.
func shellSignals(stderr io.Writer, end context.CancelCauseFunc) <-chan os.Signal {
	signal.Reset(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGWINCH)
	toAgent := make(chan os.Signal, 8)
	go func() {
		var last time.Time
		for s := range sigs {
			if s == syscall.SIGINT && time.Since(last) > doubleInterrupt {
				last = time.Now()
			} else if s == syscall.SIGINT || s == syscall.SIGTERM || s == syscall.SIGHUP {
				fmt.Fprintf(stderr, "\npurser: %s: ending the session; the agent is stopped, the task left resumable\n", s)
				end(fmt.Errorf("%w (%s)", errSignal, s))
				continue
			}
			select {
			case toAgent <- s:
			default: // the agent is not running: nothing to pass it to
			}
		}
	}()
	return toAgent
}

// shellObserver says on stderr what the user must know while the agent
// has the terminal: WARNING once, each degrade action and refusal. The
// engine tells of a tier only with an event, and an idle agent makes none:
// the WARNING line on time is also said by a timer, from the session's
// start (stop it once the session has ended).
func shellObserver(stderr io.Writer, cfg budget.Config) (observe func(purser.Event), stop func() bool) {
	var once sync.Once
	warn := func(metric budget.Metric, used string) {
		once.Do(func() {
			fmt.Fprintf(stderr, "\npurser: WARNING: the session's budget is past its warning line on %s (%s)\n", metric, used)
		})
	}
	stop = func() bool { return false }
	if w := cfg.Warning.TimeMinutes; w != nil {
		stop = time.AfterFunc(w.Duration(), func() { warn(budget.Time, w.Duration().String()+" used") }).Stop
	}
	return func(ev purser.Event) {
		switch {
		case (ev.Type == purser.EventTier || ev.Type == purser.EventUsage) && ev.Status.Tier >= budget.Warning && ev.Status.Cause != budget.Iterations:
			warn(ev.Status.Cause, budgetUsed(ev.Status))
		case ev.Type == purser.EventDegrade, ev.Type == purser.EventWarning:
			fmt.Fprintf(stderr, "\npurser: %s\n", strings.TrimPrefix(redact.Display(ev.Message), "purser: "))
		}
	}, stop
}

// budgetUsed is what the session has spent.
func budgetUsed(st budget.Status) string {
	return fmt.Sprintf("%s, %d tokens, %s used", st.UsedUSD, st.UsedTokens, st.UsedTime.Round(time.Second))
}

// budgetLine is the session's hard caps, for its first line.
func budgetLine(cfg budget.Config) string {
	var caps []string
	if u := cfg.Hard.USD; u != nil {
		caps = append(caps, "hard "+u.String())
	}
	if t := cfg.Hard.Tokens; t != nil {
		caps = append(caps, fmt.Sprintf("hard %d tokens", *t))
	}
	if m := cfg.Hard.TimeMinutes; m != nil {
		caps = append(caps, "hard "+m.Duration().String())
	}
	if len(caps) == 0 {
		return "no hard cap on money, tokens or time"
	}
	return strings.Join(caps, ", ")
}

// boxedLine says whether the agent runs in a box.
func boxedLine(t purser.Task) string {
	if c, _ := app.BackendSandbox(t.Backend); c.On() {
		return ", in its box"
	}
	return ""
}

// isTerminal reports whether r is a terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
