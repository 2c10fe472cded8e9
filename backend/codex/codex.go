// Package codex runs the OpenAI Codex CLI (`codex exec --json`) as a Purser
// backend. Codex reports tokens, never dollars: dollars are estimated from
// the catalogue, or unknown. Usage a killed run never printed is recovered
// from its rollout file under $CODEX_HOME/sessions.
package codex

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
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
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

// Parser reads `codex exec --json` output.
type Parser struct {
	prices  *pricing.Catalogue
	model   string
	emitted Usage
	Thread  string
	Failed  string // turn.failed's message
	Done    bool   // a turn completed
	Text    string // the last agent message
	Retries int    // "Reconnecting..." announcements
}

// NewParser returns a parser pricing usage of model with prices (nil:
// unpriced).
func NewParser(prices *pricing.Catalogue, model string) *Parser {
	return &Parser{prices: prices, model: model}
}

// Feed reads one line and returns the usage it adds.
func (p *Parser) Feed(b []byte) ([]budget.UsageEvent, error) {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("codex: unreadable output line: %w", err)
	}
	switch l.Type {
	case "thread.started":
		p.Thread = l.ThreadID
	case "turn.completed":
		p.Done = true
		if l.Usage != nil {
			// turn.completed carries the turn's total; several turns add up.
			return p.add(*l.Usage), nil
		}
	case "turn.failed":
		if l.Error != nil {
			p.Failed = l.Error.Message
		}
	case "error":
		if strings.HasPrefix(l.Message, "Reconnecting") {
			p.Retries++
		}
	case "item.completed":
		if l.Item != nil && l.Item.Type == "agent_message" {
			p.Text = l.Item.Text
		}
	}
	return nil, nil
}

func (p *Parser) add(u Usage) []budget.UsageEvent {
	p.emitted.Input += u.Input
	p.emitted.Cached += u.Cached
	p.emitted.CacheWrite += u.CacheWrite
	p.emitted.Output += u.Output
	p.emitted.Reasoning += u.Reasoning
	ev := u.event(p.model)
	if ev.Tokens() == 0 {
		return nil
	}
	if p.prices != nil {
		ev = p.prices.Estimate(ev)
	}
	return []budget.UsageEvent{ev}
}

// Recover takes the last total_token_usage of a rollout file (which Codex
// writes per model call and which survives a kill) and returns what the
// stream had not reported.
func (p *Parser) Recover(rollout []byte) []budget.UsageEvent {
	var last *Usage
	sc := bufio.NewScanner(strings.NewReader(string(rollout)))
	sc.Buffer(nil, proc.MaxLine)
	for sc.Scan() {
		var l struct {
			Type    string `json:"type"`
			Payload struct {
				Type string `json:"type"`
				Info *struct {
					Total *Usage `json:"total_token_usage"`
				} `json:"info"`
			} `json:"payload"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		if l.Type == "event_msg" && l.Payload.Type == "token_count" && l.Payload.Info != nil && l.Payload.Info.Total != nil {
			last = l.Payload.Info.Total
		}
	}
	if last == nil {
		return nil
	}
	missing := Usage{Input: max(last.Input-p.emitted.Input, 0), Cached: max(last.Cached-p.emitted.Cached, 0),
		CacheWrite: max(last.CacheWrite-p.emitted.CacheWrite, 0), Output: max(last.Output-p.emitted.Output, 0),
		Reasoning: max(last.Reasoning-p.emitted.Reasoning, 0)}
	return p.add(missing)
}

// Options are the backend's own settings, beside command and env (see
// proc.CLIOptions).
type Options struct {
	Sandbox string   // default workspace-write
	Args    []string // extra arguments before the prompt, e.g. approval settings
}

// Backend runs Codex.
type Backend struct {
	cli    proc.CLIOptions
	opts   Options
	prices *pricing.Catalogue
}

var _ purser.Backend = (*Backend)(nil)

// New reads a backend spec's options.
func New(spec purser.BackendSpec, prices *pricing.Catalogue) (*Backend, error) {
	cli, rest, err := proc.SplitCLIOptions("codex", spec, "codex")
	if err != nil {
		return nil, err
	}
	o := Options{Sandbox: "workspace-write"}
	for k, v := range rest {
		var ok bool
		switch k {
		case "sandbox":
			o.Sandbox, ok = v.(string)
		case "args":
			o.Args, ok = proc.StringList(v)
		default:
			return nil, proc.UnknownOption("codex", k, "sandbox", "args")
		}
		if !ok {
			return nil, fmt.Errorf("codex backend: option %s has the wrong type (%T)", k, v)
		}
	}
	return &Backend{cli: cli, opts: o, prices: prices}, nil
}

func (b *Backend) codexHome() string {
	if h := b.cli.Env["CODEX_HOME"]; h != "" {
		return h
	}
	if h := os.Getenv("CODEX_HOME"); h != "" {
		return h
	}
	return filepath.Join(b.cli.Home(), ".codex")
}

// Call runs one `codex exec`, the prompt on stdin.
func (b *Backend) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	args := []string{"exec", "--json", "--skip-git-repo-check"}
	if b.opts.Sandbox != "" {
		args = append(args, "--sandbox", b.opts.Sandbox)
	}
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}
	args = append(append(args, b.opts.Args...), "-")
	p := NewParser(b.prices, req.Model)
	var parseErr error
	out, err := proc.Run(ctx, proc.Command{Path: b.cli.Command, Args: args, Dir: req.Workspace, Env: b.cli.Environ(),
		Stdin: strings.NewReader(req.Prompt), Interrupt: syscall.SIGINT, Grace: StopGrace}, func(l []byte) {
		evs, perr := p.Feed(l)
		if perr != nil && parseErr == nil {
			parseErr = perr
		}
		for _, ev := range evs {
			report(ev)
		}
	})
	if err != nil {
		return purser.CallResult{}, fmt.Errorf("codex: %w", err)
	}
	res := purser.CallResult{Text: p.Text}
	if !p.Done && p.Thread != "" {
		matches, _ := filepath.Glob(filepath.Join(b.codexHome(), "sessions", "*", "*", "*", "rollout-*"+p.Thread+".jsonl"))
		for _, m := range matches {
			if data, err := os.ReadFile(m); err == nil {
				for _, ev := range p.Recover(data) {
					report(ev)
				}
				res.Note = "no turn.completed; usage recovered from the rollout file"
			}
		}
	}
	if p.Retries > 0 {
		res.Note = strings.TrimPrefix(res.Note+fmt.Sprintf("; %d reconnects inside Codex", p.Retries), "; ")
	}
	switch {
	case out.Stopped:
		return res, context.Cause(ctx)
	case p.Failed != "":
		msg := "codex: turn failed: " + p.Failed
		if isTransient(p.Failed) {
			return res, fmt.Errorf("%s: %w", msg, purser.ErrTransient)
		}
		return res, errors.New(msg)
	case !p.Done:
		return res, errors.New(out.Incomplete("codex exited without completing its turn", parseErr))
	}
	return res, nil
}

// isTransient: Codex gives up on 429 at once and on 5xx after its own
// reconnects; both are worth a retry by the engine, through the budget.
func isTransient(msg string) bool {
	for _, s := range []string{"429", "Too Many Requests", "high demand", "stream disconnected", "500", "502", "503", "504", "overloaded"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
