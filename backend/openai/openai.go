// Package openai is a Purser backend for any OpenAI-compatible Chat
// Completions server (OpenAI, OpenRouter, Ollama, vLLM, llama.cpp server),
// streaming, with usage on the stream. Being a raw model it edits through a
// documented protocol: whole-file blocks in its answer, which the backend
// writes into the workspace — never outside it.
package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/redact"
	"github.com/purser-dev/purser/workspace"
)

// Protocol is the system message that tells the model how to edit files.
const Protocol = `You edit files in a code workspace by answering with whole-file blocks.
To create or replace a file, write:
=== FILE: relative/path/to/file
<the complete new content of the file>
=== END FILE
To delete a file, write a line: === DELETE: relative/path/to/file
Paths are relative to the workspace root. Text outside blocks is ignored.`

// Options are the backend's settings in a task or purser.yaml.
type Options struct {
	// BaseURL is the server's API root (default https://api.openai.com/v1).
	BaseURL string `yaml:"baseUrl"`
	// APIKeyEnv names the environment variable holding the key (default
	// OPENAI_API_KEY). The key itself is never in a file.
	APIKeyEnv string `yaml:"apiKeyEnv"`
	// MaxTokensField is where the output cap goes: max_tokens (default) or
	// max_completion_tokens.
	MaxTokensField string `yaml:"maxTokensField"`
}

// NewOptions returns the backend's options with their defaults, for the
// config loader.
func NewOptions() backend.Options {
	o := defaultOptions()
	return &o
}

func defaultOptions() Options {
	return Options{BaseURL: "https://api.openai.com/v1", APIKeyEnv: "OPENAI_API_KEY", MaxTokensField: "max_tokens"}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks the options' values.
func (o Options) Validate() error {
	var errs []error
	if u, err := url.Parse(o.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, &backend.OptionError{Option: "baseUrl", Msg: fmt.Sprintf("%q: want an http or https URL such as https://openrouter.ai/api/v1", o.BaseURL)})
	}
	if !envName.MatchString(o.APIKeyEnv) {
		// Not echoed: a key pasted here by mistake must not reach a terminal or log.
		errs = append(errs, &backend.OptionError{Option: "apiKeyEnv", Msg: "want the name of an environment variable (letters, digits, _), such as OPENROUTER_API_KEY; the key itself never goes in a file"})
	}
	if o.MaxTokensField != "max_tokens" && o.MaxTokensField != "max_completion_tokens" {
		errs = append(errs, &backend.OptionError{Option: "maxTokensField", Msg: fmt.Sprintf("%q: want max_tokens or max_completion_tokens", o.MaxTokensField)})
	}
	return errors.Join(errs...)
}

// Check checks that the key's environment variable is set. The key's value
// is never said.
func (o Options) Check(string) error {
	if os.Getenv(o.APIKeyEnv) == "" {
		return &backend.OptionError{Option: "apiKeyEnv", Msg: fmt.Sprintf("the environment variable %s is not set: the API key comes from the environment only", o.APIKeyEnv)}
	}
	return nil
}

// Backend calls a Chat Completions server.
type Backend struct {
	opts    Options
	key     string // from the environment only; never logged
	client  *http.Client
	counter contextbuild.Counter
}

var _ purser.Backend = (*Backend)(nil)

// New reads a backend spec's options (see Options) and the key.
func New(spec purser.BackendSpec) (*Backend, error) {
	o := defaultOptions()
	if err := backend.DecodeChecked(spec, &o); err != nil {
		return nil, err
	}
	key := os.Getenv(o.APIKeyEnv) // from the environment only; never logged
	counter, err := contextbuild.DefaultCounter()
	if err != nil {
		return nil, err
	}
	// No client timeout: the call's context and the stall window bound it.
	// No retries here: retries are Purser's (engine.RetryPolicy).
	return &Backend{opts: o, key: key, client: &http.Client{}, counter: counter}, nil
}

// messageOverhead is what a chat message costs beyond its text, per
// OpenAI's counting (role and separators), rounded up.
const messageOverhead = 4

// Overhead is how many input tokens the backend adds to the engine's prompt:
// the protocol message and the framing of both messages.
func (b *Backend) Overhead() int64 {
	return int64(b.counter.Count(Protocol)) + 3*messageOverhead
}

// chatRequest is the body of a streaming Chat Completions request: what
// Purser sends, no more.
type chatRequest struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`
	Stream              bool          `json:"stream"`
	StreamOptions       streamOptions `json:"stream_options"`
	MaxTokens           *int64        `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64        `json:"max_completion_tokens,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatChunk is what Purser reads of a streamed chunk: the text deltas, the
// usage (on the last chunk, or on each with some servers), and an error a
// server may send in the stream after it began.
type chatChunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *chatUsage      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// chatUsage is a chunk's usage; Cost is OpenRouter's usage.cost, kept raw
// so that its decimal is parsed exactly.
type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	Cost json.RawMessage `json:"cost"`
}

// params is the request of a call: the edit protocol and the prompt, its
// usage streamed, and its output capped at what the budget admitted.
func (b *Backend) params(req purser.CallRequest) (chatRequest, error) {
	params := chatRequest{
		Model:         req.Model,
		Messages:      []chatMessage{{Role: "system", Content: Protocol}, {Role: "user", Content: req.Prompt}},
		Stream:        true,
		StreamOptions: streamOptions{IncludeUsage: true},
	}
	if req.MaxOutputTokens > 0 {
		// The engine admitted the prompt plus MaxOutputTokens; the protocol
		// message comes out of the output's share, so the call as sent
		// never uses more than was reserved.
		maxOut := req.MaxOutputTokens - b.Overhead()
		if maxOut < 1 {
			return params, fmt.Errorf("openai: no room for output under the budget (%d tokens admitted, %d needed by the edit protocol): %w",
				req.MaxOutputTokens, b.Overhead(), budget.ErrInsufficientBudget)
		}
		if b.opts.MaxTokensField == "max_completion_tokens" {
			params.MaxCompletionTokens = &maxOut
		} else {
			params.MaxTokens = &maxOut
		}
	}
	return params, nil
}

// Call sends the prompt and applies the answer's file blocks.
func (b *Backend) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	params, err := b.params(req)
	if err != nil {
		return purser.CallResult{}, err
	}
	// The stall detector: nothing from the provider (no answer to the
	// request, no byte of its stream) for the stall window ends the call.
	streamCtx, stall := context.WithCancelCause(ctx)
	defer stall(nil)
	var watch *idleWatch
	if req.StallTimeout > 0 {
		watch = newIdleWatch(req.StallTimeout, func() {
			stall(&purser.StallError{Window: req.StallTimeout, Source: "the provider (no answer, or a silent stream)"})
		})
		defer watch.stop()
	}
	var text strings.Builder
	var usage *chatUsage
	chunks := 0
	err = b.stream(streamCtx, params, watch, func(c *chatChunk) {
		chunks++
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
		}
		if c.Usage != nil && c.Usage.TotalTokens > 0 {
			usage = c.Usage
		}
	})
	if err == nil && chunks == 0 {
		// An empty or unreadable body is no answer, whatever its status.
		err = errors.New("the server's stream held no completion chunk")
	}
	if usage != nil {
		report(event(req.Model, *usage))
	}
	if err != nil {
		if ctx.Err() != nil {
			return purser.CallResult{}, context.Cause(ctx)
		}
		if cause := context.Cause(streamCtx); errors.Is(cause, purser.ErrStalled) {
			return purser.CallResult{}, cause
		}
		return purser.CallResult{}, Classify(err)
	}
	res := purser.CallResult{Text: text.String()}
	if usage == nil {
		report(budget.UsageEvent{Model: req.Model, CostSource: budget.CostUnknown})
		res.Note = "the server reported no usage"
	}
	applied, problems := Apply(req.Guard, req.Workspace, text.String())
	res.Note = strings.TrimPrefix(res.Note+fmt.Sprintf("; %d file(s) written", applied), "; ")
	if len(problems) > 0 {
		res.Feedback = "Some of your file blocks were not applied:\n" + strings.Join(problems, "\n")
		res.Note += "; " + strings.Join(problems, "; ")
	}
	return res, nil
}

// stream posts the request and calls onChunk for each chunk of the
// server-sent event stream, until [DONE] or the stream's end. An HTTP error
// status is an *APIError; an error the server sends in the stream after it
// began ends it with that error.
func (b *Backend) stream(ctx context.Context, params chatRequest, watch *idleWatch, onChunk func(*chatChunk)) error {
	body, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("openai: encode the request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(b.opts.BaseURL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("openai: %w", redactedError{err})
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if b.key != "" {
		hreq.Header.Set("Authorization", "Bearer "+b.key)
	}
	if watch != nil {
		watch.touch()
	}
	resp, err := b.client.Do(hreq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r io.Reader = resp.Body
	if watch != nil {
		watch.touch()
		r = &watchedBody{r: resp.Body, w: watch}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return apiError(resp, r)
	}
	return readEvents(r, func(data []byte) (bool, error) {
		if bytes.HasPrefix(data, []byte("[DONE]")) {
			return false, nil
		}
		var c chatChunk
		if err := json.Unmarshal(data, &c); err != nil {
			var typeErr *json.UnmarshalTypeError
			if !errors.As(err, &typeErr) {
				return false, fmt.Errorf("a stream event that is not JSON: %w", err)
			}
			// A field of an unexpected type is left out, the rest kept.
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return false, fmt.Errorf("received error while streaming: %s", errorText(c.Error))
		}
		onChunk(&c)
		return true, nil
	})
}

// maxEventBytes bounds one line of the stream: a longer one is refused,
// never held whole. Comment lines (": …", keep-alives) are skipped at any
// length.
const maxEventBytes = 32 << 20

// readEvents reads a server-sent event stream and calls onData with each
// event's data (its data lines joined by newlines), until onData says stop
// or the stream ends. The end of the stream is not an error (an event not
// closed by a blank line is dropped); a read error is.
func readEvents(r io.Reader, onData func([]byte) (more bool, err error)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var data []byte
	haveData := false
	for {
		line, err := readLine(br)
		if err != nil && err != io.EOF {
			return err
		}
		switch {
		case len(line) == 0:
			if haveData {
				more, err := onData(data)
				if err != nil || !more {
					return err
				}
			}
			data, haveData = data[:0], false
		case line[0] == ':':
			// A comment.
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			if string(field) == "data" {
				if haveData {
					data = append(data, '\n')
				}
				data, haveData = append(data, bytes.TrimPrefix(value, []byte(" "))...), true
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// readLine reads one line without its end (\n or \r\n). A comment line
// comes back as ":" whatever its length; another line longer than
// maxEventBytes is an error.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	comment := false
	for first := true; ; first = false {
		chunk, err := br.ReadSlice('\n')
		if first && len(chunk) > 0 && chunk[0] == ':' {
			comment, line = true, []byte(":")
		}
		if !comment {
			if len(line)+len(chunk) > maxEventBytes {
				return nil, fmt.Errorf("a stream line longer than %d MB", maxEventBytes>>20)
			}
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if !comment {
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		}
		return line, err
	}
}

// APIError is an HTTP error status from the server, with the message its
// body gave (OpenAI's {"error": {"message": …}}, or the body's text).
type APIError struct {
	StatusCode int
	Message    string
	RetryAfter string // the Retry-After header, if any
}

func (e *APIError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.StatusCode, e.Message)
}

// apiError reads an error response's body (its first 64 KiB).
func apiError(resp *http.Response, body io.Reader) error {
	b, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	msg := strings.TrimSpace(string(b))
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &v) == nil && len(v.Error) > 0 && string(v.Error) != "null" {
		msg = errorText(v.Error)
	}
	return &APIError{StatusCode: resp.StatusCode, Message: msg, RetryAfter: resp.Header.Get("Retry-After")}
}

// errorText is an error object's message: its "message" field, or the
// object itself (some servers send a string).
func errorText(raw json.RawMessage) string {
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// event turns the server's usage into a usage event. OpenRouter's
// usage.cost is taken as reported; otherwise the event carries tokens only,
// and the engine estimates its dollars.
func event(model string, u chatUsage) budget.UsageEvent {
	ev := budget.UsageEvent{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, Model: model,
		CacheReadTokens: min(u.PromptTokensDetails.CachedTokens, u.PromptTokens),
		ReasoningTokens: min(u.CompletionTokensDetails.ReasoningTokens, u.CompletionTokens),
	}
	if raw := string(u.Cost); raw != "" && raw != "null" {
		if cost, err := budget.ParseUSD(raw); err == nil && cost >= 0 {
			ev.USD, ev.CostSource = cost, budget.CostReported
		}
	}
	return ev
}

// Classify tells the fault of a failed request as on every backend: by its
// HTTP status (and a 429's Retry-After), or, without one, by what broke. The
// server's words are kept, secrets masked: an error may quote the key.
func Classify(err error) error {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return &proc.FaultError{Backend: "openai", Fault: proc.StatusFault(apiErr.StatusCode),
			Detail:     fmt.Sprintf("HTTP %d: %s", apiErr.StatusCode, redact.String(apiErr.Message)),
			RetryAfter: retryAfter(apiErr.RetryAfter, time.Now())}
	}
	detail := redact.String(err.Error())
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return &proc.FaultError{Backend: "openai", Fault: proc.FaultRefused, Detail: detail}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed):
		return &proc.FaultError{Backend: "openai", Fault: proc.FaultDropped, Detail: detail}
	case errors.As(err, &netErr) && netErr.Timeout():
		return &proc.FaultError{Backend: "openai", Fault: proc.FaultTimeout, Detail: detail}
	case errors.As(err, &netErr):
		f := proc.TextFault(err.Error())
		if !f.Transient() {
			f = proc.FaultDropped // a network error: the connection failed, not the request
		}
		return &proc.FaultError{Backend: "openai", Fault: f, Detail: detail}
	}
	if f := proc.TextFault(err.Error()); f.Transient() {
		return &proc.FaultError{Backend: "openai", Fault: f, Detail: detail}
	}
	return fmt.Errorf("openai: %w", redactedError{err})
}

// maxRetryAfter bounds the wait a Retry-After header may ask for.
const maxRetryAfter = 10 * time.Minute

// retryAfter reads a Retry-After header: seconds or an HTTP date; 0 when
// absent or unreadable.
func retryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	if secs, err := strconv.Atoi(h); err == nil {
		return min(max(time.Duration(secs)*time.Second, 0), maxRetryAfter)
	}
	if at, err := http.ParseTime(h); err == nil {
		return min(max(at.Sub(now), 0), maxRetryAfter)
	}
	return 0
}

// idleWatch calls fire once window passes with no answer and no byte of a
// response body.
type idleWatch struct {
	window time.Duration
	timer  *time.Timer
}

func newIdleWatch(window time.Duration, fire func()) *idleWatch {
	return &idleWatch{window: window, timer: time.AfterFunc(window, fire)}
}

func (w *idleWatch) touch() { w.timer.Reset(w.window) }
func (w *idleWatch) stop()  { w.timer.Stop() }

// watchedBody touches its watch on every read that brings bytes.
type watchedBody struct {
	r io.Reader
	w *idleWatch
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.w.touch()
	}
	return n, err
}

// redactedError masks the secrets in an error's message and still matches
// what it wraps.
type redactedError struct{ err error }

func (e redactedError) Error() string { return redact.String(e.err.Error()) }
func (e redactedError) Unwrap() error { return e.err }

// Apply writes the answer's file blocks into the workspace dir and returns
// how many were applied, and what could not be, with why. guard says which
// files are Purser's own (nil: those by name only).
func Apply(guard *workspace.Guard, dir, answer string) (applied int, problems []string) {
	lines := strings.Split(answer, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], "\r")
		switch {
		case strings.HasPrefix(line, "=== DELETE:"):
			path := strings.TrimSpace(strings.TrimPrefix(line, "=== DELETE:"))
			target, err := guard.Writable(dir, path)
			if err == nil {
				err = os.Remove(target)
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("delete %q: %v", path, err))
				continue
			}
			applied++
		case strings.HasPrefix(line, "=== FILE:"):
			path := strings.TrimSpace(strings.TrimPrefix(line, "=== FILE:"))
			end := -1
			for j := i + 1; j < len(lines); j++ {
				if strings.TrimRight(lines[j], "\r") == "=== END FILE" {
					end = j
					break
				}
			}
			if end < 0 {
				problems = append(problems, fmt.Sprintf("file %q: no '=== END FILE' line closes its block", path))
				return applied, problems
			}
			content := strings.Join(lines[i+1:end], "\n") + "\n"
			i = end
			target, err := guard.Writable(dir, path)
			if err == nil {
				err = os.MkdirAll(filepath.Dir(target), 0o755)
			}
			if err == nil {
				// Replaced, not written into: a hard link to a file outside
				// the workspace is never written through.
				err = workspace.ReplaceFile(target, []byte(content), 0o644)
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("file %q: %v", path, err))
				continue
			}
			applied++
		}
	}
	return applied, problems
}
