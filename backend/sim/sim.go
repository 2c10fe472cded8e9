// Package sim is a scripted, deterministic backend for demos and tests. Each
// call takes the next step of its script (the last step repeats): it streams
// the step's usage evenly over the step's delay, writes the step's files into
// the workspace, and may fail. Every call is appended to a transcript.
package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/yamlfile"
	"github.com/purser-dev/purser/redact"
	"github.com/purser-dev/purser/workspace"
)

// Step is one scripted call.
type Step struct {
	Usage   backend.Usage     `yaml:"usage"`
	Files   map[string]string `yaml:"files"`
	DelayMs int               `yaml:"delayMs"`
	Fail    string            `yaml:"fail"` // "", transient or fatal
}

// Script is a sim backend's script file.
type Script struct {
	Steps []Step `yaml:"steps"`
}

// TranscriptLine is one call as the sim received it.
type TranscriptLine struct {
	Kind          purser.CallKind `json:"kind"`
	Iteration     int             `json:"iteration"`
	Attempt       int             `json:"attempt"`
	Step          int             `json:"step"`
	Model         string          `json:"model"`
	Prompt        string          `json:"prompt"`
	ContextTokens int             `json:"contextTokens"`
	MaxOutput     int64           `json:"maxOutputTokens,omitempty"`
	Cancelled     bool            `json:"cancelled"`
}

// chunkEvery is how often usage streams out during a step's delay.
const chunkEvery = 10 * time.Millisecond

// Backend plays a script.
type Backend struct {
	steps      []Step
	transcript string

	mu   sync.Mutex
	next int
}

var (
	_ purser.Backend    = (*Backend)(nil)
	_ purser.SpendFence = (*Backend)(nil)
)

// Load reads a script; errors name the file, line and field.
func Load(path string) (*Script, error) {
	var s Script
	if err := yamlfile.DecodeFile(path, &s); err != nil {
		return nil, err
	}
	if len(s.Steps) == 0 {
		return nil, yamlfile.FieldError(path, "steps", "at least one step is required")
	}
	for i, st := range s.Steps {
		field := fmt.Sprintf("steps[%d]", i)
		if _, err := st.Usage.Event(nil); err != nil {
			return nil, yamlfile.FieldError(path, field+".usage", err.Error())
		}
		if st.DelayMs < 0 {
			return nil, yamlfile.FieldError(path, field+".delayMs", "must not be negative")
		}
		if st.Fail != "" && st.Fail != "transient" && st.Fail != "fatal" {
			return nil, yamlfile.FieldError(path, field+".fail", fmt.Sprintf("%q: want transient or fatal", st.Fail))
		}
		for p := range st.Files {
			if err := checkRel(p); err != nil {
				return nil, yamlfile.FieldError(path, field+".files", err.Error())
			}
		}
	}
	return &s, nil
}

// Options are the sim backend's options. Paths are relative to the file
// that configured the backend.
type Options struct {
	// Script is the YAML file of steps (required).
	Script string `yaml:"script"`
	// Transcript, if set, is the JSON Lines file every call is appended to.
	Transcript string `yaml:"transcript"`
}

// NewOptions returns the sim backend's options, for the config loader.
func NewOptions() backend.Options { return &Options{} }

// Validate checks that a script is named.
func (o Options) Validate() error {
	if o.Script == "" {
		return &backend.OptionError{Option: "script", Msg: "is required: a YAML file with steps:, relative to this file"}
	}
	return nil
}

// Check loads and validates the script, and checks that the transcript's
// directory exists.
func (o Options) Check(dir string) error {
	_, err := o.load(dir)
	return err
}

// load reads the script and checks the transcript's directory.
func (o Options) load(dir string) (*Script, error) {
	path := resolve(dir, o.Script)
	if _, err := os.Stat(path); err != nil {
		return nil, &backend.OptionError{Option: "script", Msg: fmt.Sprintf("cannot read the script: %v", err), Err: err}
	}
	s, err := Load(path)
	if err != nil {
		return nil, &backend.OptionError{Option: "script", Msg: err.Error(), Err: err}
	}
	if o.Transcript != "" {
		tdir := filepath.Dir(resolve(dir, o.Transcript))
		if fi, err := os.Stat(tdir); err != nil || !fi.IsDir() {
			return nil, &backend.OptionError{Option: "transcript", Msg: fmt.Sprintf("its directory %s does not exist", tdir)}
		}
	}
	return s, nil
}

// New returns a backend from a task's backend spec; see Options.
func New(spec purser.BackendSpec) (*Backend, error) {
	var o Options
	if err := backend.DecodeOptions(spec, &o); err != nil {
		return nil, err
	}
	s, err := o.load(spec.Dir)
	if err != nil {
		return nil, err
	}
	b := &Backend{steps: s.Steps}
	if o.Transcript != "" {
		b.transcript = resolve(spec.Dir, o.Transcript)
	}
	return b, nil
}

// OwnFiles returns the transcript, if any (a workspace.FileOwner): no
// agent may write it.
func (b *Backend) OwnFiles() []string {
	if b.transcript == "" {
		return nil
	}
	return []string{b.transcript}
}

func resolve(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// ReportsUSD reports whether every step of the script reports its cost
// (purser.USDReporter): the same as FencesUSD.
func (b *Backend) ReportsUSD(model string) bool { return b.FencesUSD(model) }

// FencesUSD reports whether every step of the script reports its cost: then
// each dollar is reported as it streams, and the engine's money cap acts
// during the call whatever the model (purser.SpendFence).
func (b *Backend) FencesUSD(string) bool {
	for _, st := range b.steps {
		u := st.Usage
		if u.CostUSD == nil && u.InputTokens+u.OutputTokens > 0 {
			return false
		}
	}
	return true
}

func (b *Backend) take() (int, Step) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := min(b.next, len(b.steps)-1)
	b.next++
	return i, b.steps[i]
}

// Call plays the next step.
func (b *Backend) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	i, step := b.take()
	line := TranscriptLine{Kind: req.Kind, Iteration: req.Iteration, Attempt: req.Attempt, Step: i, Model: req.Model,
		Prompt: redact.String(req.Prompt), ContextTokens: req.ContextTokens, MaxOutput: req.MaxOutputTokens}
	ev, err := step.Usage.Event(nil)
	if err != nil {
		return purser.CallResult{}, err
	}
	if ev.Model == "" {
		ev.Model = req.Model
	}
	// Like a real API given max_tokens, the sim never outputs more than the
	// budget admitted.
	if req.MaxOutputTokens > 0 && ev.OutputTokens > req.MaxOutputTokens {
		ev.OutputTokens = req.MaxOutputTokens
		ev.ReasoningTokens = min(ev.ReasoningTokens, ev.OutputTokens)
	}
	if err := stream(ctx, ev, time.Duration(step.DelayMs)*time.Millisecond, req.Price, report); err != nil {
		line.Cancelled = true
		return purser.CallResult{}, errors.Join(err, b.write(line))
	}
	if err := b.write(line); err != nil {
		return purser.CallResult{}, err
	}
	switch step.Fail {
	case "transient":
		return purser.CallResult{}, fmt.Errorf("sim step %d: scripted overload: %w", i, purser.ErrTransient)
	case "fatal":
		return purser.CallResult{}, fmt.Errorf("sim step %d: scripted fatal error", i)
	}
	// The transcript is the sim's own whatever guard it is handed.
	guard := req.Guard.With(b.OwnFiles()...)
	for p, content := range step.Files {
		if err := writeFile(guard, req.Workspace, p, content); err != nil {
			return purser.CallResult{}, fmt.Errorf("sim step %d: %w", i, err)
		}
	}
	return purser.CallResult{Text: fmt.Sprintf("sim step %d", i)}, nil
}

// stream reports ev in equal parts over delay; the parts add up exactly to
// ev. It stops at once when ctx is done, with what was reported so far.
//
// The parts are one request, so they are billed as one: with price (the
// engine's, CallRequest.Price) a step without a reported cost is priced
// whole and each part carries its share of that price, so a long-context
// step is not priced as short ones. Each kind of token is split on its own
// (uncached input, cache reads, 5-minute and 1-hour writes, reasoning and
// other output), so every part is a valid event and each sum is exact.
func stream(ctx context.Context, ev budget.UsageEvent, delay time.Duration, price func(budget.UsageEvent) budget.UsageEvent, report purser.UsageFunc) error {
	if price != nil && ev.CostSource == budget.CostNone && ev.Tokens() > 0 {
		ev = price(ev)
	}
	n := int64(1)
	if delay > 0 {
		n = max(1, min(int64(delay/chunkEvery), 50))
	}
	tick := delay / time.Duration(n)
	// share is part k's share of x: the parts of x add up to x exactly.
	share := func(x, k int64) int64 { return x*k/n - x*(k-1)/n }
	uncached := ev.InputTokens - ev.CacheReadTokens - ev.CacheWriteTokens
	write5m := ev.CacheWriteTokens - ev.CacheWrite1hTokens
	plainOut := ev.OutputTokens - ev.ReasoningTokens
	for k := int64(1); k <= n; k++ {
		if tick > 0 {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(tick):
			}
		} else if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		part := budget.UsageEvent{
			CacheReadTokens:    share(ev.CacheReadTokens, k),
			CacheWrite1hTokens: share(ev.CacheWrite1hTokens, k),
			ReasoningTokens:    share(ev.ReasoningTokens, k),
			ServiceTier:        ev.ServiceTier,
			USD:                budget.USD(share(int64(ev.USD), k)),
			CostSource:         ev.CostSource,
			PriceSource:        ev.PriceSource,
			Model:              ev.Model,
		}
		part.CacheWriteTokens = share(write5m, k) + part.CacheWrite1hTokens
		part.InputTokens = share(uncached, k) + part.CacheReadTokens + part.CacheWriteTokens
		part.OutputTokens = share(plainOut, k) + part.ReasoningTokens
		if part.Tokens() > 0 || part.USD > 0 {
			report(part)
		}
	}
	return nil
}

func (b *Backend) write(line TranscriptLine) error {
	if b.transcript == "" {
		return nil
	}
	data, err := json.Marshal(line)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	f, err := os.OpenFile(b.transcript, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("sim transcript: %w", err)
	}
	defer f.Close()
	_, err = f.Write(append(data, '\n'))
	return err
}

func checkRel(p string) error {
	if clean, err := workspace.CheckRelative(p); err != nil || clean == "." {
		return fmt.Errorf("file %q: want a path inside the workspace", p)
	}
	return nil
}

// writeFile writes content to rel inside the workspace dir, refusing any
// path that leads out, through a symlink or otherwise, and Purser's own
// files (guard). It replaces the file rather than writing into it, so a
// hard link to a file outside is never written through.
func writeFile(guard *workspace.Guard, dir, rel, content string) error {
	target, err := guard.Writable(dir, rel)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	return workspace.ReplaceFile(target, []byte(content), 0o644)
}
