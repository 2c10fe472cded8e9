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
	"syscall"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
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

// Parser reads Gemini CLI's stream-json output.
type Parser struct {
	prices  *pricing.Catalogue
	Session string
	Done    bool   // a result line was read
	Failed  string // the result's error, if it failed
	Text    strings.Builder
	seen    map[string]bool // chat-file message ids already counted
}

// NewParser returns a parser that prices with prices (nil: unpriced).
func NewParser(prices *pricing.Catalogue) *Parser {
	return &Parser{prices: prices, seen: map[string]bool{}}
}

func (p *Parser) price(ev budget.UsageEvent) budget.UsageEvent {
	if p.prices == nil {
		return ev
	}
	return p.prices.Estimate(ev)
}

// Feed reads one line and returns the usage it adds.
func (p *Parser) Feed(b []byte) ([]budget.UsageEvent, error) {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("gemini: unreadable output line: %w", err)
	}
	switch l.Type {
	case "init":
		p.Session = l.SessionID
	case "message":
		if l.Role == "assistant" {
			p.Text.WriteString(l.Content)
		}
	case "result":
		if p.Done {
			return nil, nil // one result per run: never counted twice
		}
		p.Done = true
		if l.Status != "success" {
			p.Failed = l.Status
			if l.Error != nil {
				p.Failed = l.Error.Message
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
			if ev := l.Stats.Models[m].event(m); ev.Tokens() > 0 {
				evs = append(evs, p.price(ev))
			}
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

// Recover reads a chat file, which keeps each model message's tokens even
// after a kill, and returns the usage of messages not yet counted. It is
// for a run that printed no result: a result already counts everything.
func (p *Parser) Recover(chat []byte) []budget.UsageEvent {
	if p.Done {
		return nil
	}
	var evs []budget.UsageEvent
	for _, b := range bytes.Split(chat, []byte("\n")) {
		var l chatLine
		if json.Unmarshal(b, &l) != nil || l.Type != "gemini" || l.Tokens == nil || l.ID == "" || p.seen[l.ID] {
			continue
		}
		p.seen[l.ID] = true
		t := l.Tokens
		ev := budget.UsageEvent{InputTokens: max(t.Input, 0), CacheReadTokens: min(max(t.Cached, 0), max(t.Input, 0)),
			OutputTokens: max(t.Output, 0) + max(t.Thoughts, 0), ReasoningTokens: max(t.Thoughts, 0), Model: l.Model}
		if ev.Tokens() > 0 {
			evs = append(evs, p.price(ev))
		}
	}
	return evs
}

// Options are the backend's own settings, beside command and env (see
// proc.CLIOptions).
type Options struct {
	ApprovalMode string // default yolo: shell and file tools
}

// Backend runs Gemini CLI.
type Backend struct {
	cli    proc.CLIOptions
	opts   Options
	prices *pricing.Catalogue
}

var _ purser.Backend = (*Backend)(nil)

// New reads a backend spec's options.
func New(spec purser.BackendSpec, prices *pricing.Catalogue) (*Backend, error) {
	cli, rest, err := proc.SplitCLIOptions("gemini", spec, "gemini")
	if err != nil {
		return nil, err
	}
	o := Options{ApprovalMode: "yolo"}
	for k, v := range rest {
		s, ok := v.(string)
		switch {
		case k != "approvalMode":
			return nil, proc.UnknownOption("gemini", k, "approvalMode")
		case !ok:
			return nil, fmt.Errorf("gemini backend: option %s must be a string", k)
		}
		o.ApprovalMode = s
	}
	return &Backend{cli: cli, opts: o, prices: prices}, nil
}

// Call runs one `gemini -p`.
func (b *Backend) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	if len(req.Prompt) > MaxPrompt {
		return purser.CallResult{}, fmt.Errorf("gemini: the prompt is %d bytes; gemini -p takes at most %d (shrink the context)", len(req.Prompt), MaxPrompt)
	}
	args := []string{"-p", req.Prompt, "--skip-trust", "--output-format", "stream-json"}
	if b.opts.ApprovalMode != "" {
		args = append(args, "--approval-mode", b.opts.ApprovalMode)
	}
	if req.Model != "" {
		args = append(args, "-m", req.Model)
	}
	// The launcher would re-spawn itself and ignore signals; no relaunch
	// means a signal to the group stops the CLI itself.
	env := b.cli.Environ("GEMINI_CLI_NO_RELAUNCH=true")
	p := NewParser(b.prices)
	var parseErr error
	out, err := proc.Run(ctx, proc.Command{Path: b.cli.Command, Args: args, Dir: req.Workspace, Env: env,
		Interrupt: syscall.SIGTERM, Grace: StopGrace}, func(l []byte) {
		evs, perr := p.Feed(l)
		if perr != nil && parseErr == nil {
			parseErr = perr
		}
		for _, ev := range evs {
			report(ev)
		}
	})
	if err != nil {
		return purser.CallResult{}, fmt.Errorf("gemini: %w", err)
	}
	res := purser.CallResult{Text: p.Text.String()}
	if !p.Done && p.Session != "" {
		for _, ev := range b.recover(p) {
			report(ev)
		}
		res.Note = "no result line; usage recovered from the chat file"
	}
	switch {
	case out.Stopped:
		return res, context.Cause(ctx)
	case p.Failed != "":
		// The exit code is the HTTP status mod 256, and a total failure may
		// exit 0: the result line is what counts.
		msg := "gemini: " + p.Failed
		if isTransient(p.Failed) {
			return res, fmt.Errorf("%s: %w", msg, purser.ErrTransient)
		}
		return res, errors.New(msg)
	case !p.Done:
		return res, errors.New(out.Incomplete("gemini exited without a result", parseErr))
	}
	return res, nil
}

func (b *Backend) recover(p *Parser) []budget.UsageEvent {
	matches, _ := filepath.Glob(filepath.Join(b.cli.Home(), ".gemini", "tmp", "*", "chats", "session-*.jsonl"))
	var evs []budget.UsageEvent
	for _, m := range matches {
		data, err := os.ReadFile(m)
		if err != nil || !bytes.Contains(data, []byte(p.Session)) {
			continue
		}
		evs = append(evs, p.Recover(data)...)
	}
	return evs
}

func isTransient(msg string) bool {
	for _, s := range []string{"429", "500", "502", "503", "504", "RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "overloaded", "fetch failed", "ECONNRESET", "terminated"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
