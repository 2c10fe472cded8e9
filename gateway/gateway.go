// Package gateway is Purser's door: the one way an agent reaches its model
// provider. A Lane is opened for each call (or each task of a shared
// gateway): it listens on 127.0.0.1 (and, for a boxed agent, on a unix
// socket bound into the box), takes a scoped random token as the agent's
// API key, and for every model request it
//
//   - checks the Host header (loopback names only) and the token, and
//     puts the real provider key, which the agent never holds, in its place;
//   - passes only the routes it knows (Anthropic Messages and count_tokens,
//     OpenAI Chat Completions and Responses, Gemini generateContent and
//     streamGenerateContent, model listings), refusing anything else by name;
//   - admits the request through the call's purser.WireAdmitter before a
//     byte is forwarded: input counted from the body, output bounded by
//     its max-output field, the model and that bound rewritten as granted,
//     a refusal answered in the provider's own error shape;
//   - reads the reply at the provider's own pace into a bounded buffer,
//     booking its usage (the call's UsageFunc, the wire journal) the moment
//     it is whole, whatever the agent's reading pace;
//   - cuts the reply mid-stream when the lane's context ends (the engine
//     cancels it at the HARD cap).
//
// Bodies and keys are never logged or journalled: the journal holds token
// counts and model names only.
package gateway

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/meter"
)

// The wire protocols a lane speaks.
const (
	Anthropic       = "anthropic"
	OpenAIChat      = "openai-chat"
	OpenAIResponses = "openai-responses"
	Gemini          = "gemini"
)

// Protocols are the protocols a lane may speak, in the order docs name them.
var Protocols = []string{Anthropic, OpenAIChat, OpenAIResponses, Gemini}

// KnownProtocol reports whether p is one of Protocols.
func KnownProtocol(p string) bool {
	for _, q := range Protocols {
		if p == q {
			return true
		}
	}
	return false
}

// DefaultUpstream is the vendor's base URL of a protocol.
func DefaultUpstream(protocol string) string {
	switch protocol {
	case Anthropic:
		return "https://api.anthropic.com"
	case OpenAIChat, OpenAIResponses:
		return "https://api.openai.com/v1"
	case Gemini:
		return "https://generativelanguage.googleapis.com"
	}
	return ""
}

// LaneConfig is one lane: what it forwards to, with which key, and to whom
// it reports.
type LaneConfig struct {
	// Task is the task the lane's requests are attributed to.
	Task string
	// Protocol is the wire protocol the agent speaks (one of Protocols).
	// The OpenAI lanes pass both OpenAI routes; the others only their own.
	Protocol string
	// Upstream is the provider's base URL ("" for DefaultUpstream). Its
	// path is kept before each request's path, a version segment the
	// request repeats (/v1, /v1beta) once.
	Upstream string
	// Key is the real provider key the door puts in each request.
	Key Key
	// Getenv is the environment Key.Env is read from (nil: Purser's own,
	// os.Getenv); a CLI backend passes its options' env over Purser's.
	Getenv func(string) string
	// Model is the model usage is booked under when neither the request
	// nor the reply names one.
	Model string
	// Report receives each reply's usage the moment it is whole (nil: the
	// lane journals only). It is never called concurrently.
	Report purser.UsageFunc
	// Admit admits each model request (nil: every request passes, still
	// metered and journalled).
	Admit purser.WireAdmitter
	// Journal is the wire journal to append each reply's usage to ("" for
	// none).
	Journal string
	// MaxOutputTokens bounds the output of all the lane's replies together
	// (CallRequest.MaxOutputTokens; 0: none): each request's output bound is
	// clamped to what remains of it, and a request when none remains is
	// refused.
	MaxOutputTokens int64
	// BufferBytes bounds what is held of one reply between the provider and
	// the agent (0: DefaultBuffer).
	BufferBytes int
}

// DefaultBuffer is how much of a reply the door holds for an agent that
// reads slower than the provider sends: enough for any usual reply whole,
// so that its usage is booked when the provider finishes, not the agent.
const DefaultBuffer = 4 << 20

// maxRequest bounds a request body: the door reads it whole to count and
// rewrite it.
const maxRequest = 64 << 20

// Lane is an open lane: a listener, a token, and the state of its requests.
type Lane struct {
	cfg       LaneConfig
	up        *url.URL
	key       string // the real key; never logged
	token     string // the agent's key; "" when the lane holds no key
	ctx       context.Context
	cancel    context.CancelFunc
	ln        net.Listener
	srv       *http.Server
	transport *http.Transport
	journal   *meter.Journal

	carried atomic.Int64 // reply bytes read from the provider
	subs    subAgents    // the sub-agents spawned on the lane (subagent.go)

	reportMu sync.Mutex // serialises Report
	mu       sync.Mutex // guards what follows
	extra    []net.Listener
	lastErr  error
	requests int   // model requests forwarded
	refused  int   // model requests refused
	booked   int   // replies whose usage was booked
	cut      int   // replies cut by the lane's end
	output   int64 // output tokens booked
	closed   bool
	inflight sync.WaitGroup

	remote *remoteLane // the lane is the door's service's (UseService); nil: in-process
}

// Open opens a lane: ctx is the call's (its end, the hard cap or a signal,
// cuts every reply in flight and refuses what follows). The lane listens
// on 127.0.0.1 on a free port until Close. After UseService the lane is
// the door's service's, its key read there; a service that does not answer
// is a *ServiceDownError, never an in-process lane.
func Open(ctx context.Context, c LaneConfig) (*Lane, error) {
	return open(ctx, c, ServiceSocket() != "")
}

// open opens a lane on the service (remote) or in this process (the
// service's own lanes are).
func open(ctx context.Context, c LaneConfig, remote bool) (*Lane, error) {
	if !KnownProtocol(c.Protocol) {
		return nil, fmt.Errorf("gateway: protocol %q: want one of %s", c.Protocol, strings.Join(Protocols, ", "))
	}
	if c.Upstream == "" {
		c.Upstream = DefaultUpstream(c.Protocol)
	}
	u, err := url.Parse(c.Upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gateway: upstream %q: want an http or https URL", c.Upstream)
	}
	if c.BufferBytes <= 0 {
		c.BufferBytes = DefaultBuffer
	}
	if remote {
		return openRemote(ctx, c)
	}
	key, err := c.Key.value(c.Getenv)
	if err != nil {
		return nil, err
	}
	l := &Lane{cfg: c, up: u, key: key}
	if key != "" {
		var b [24]byte
		_, _ = rand.Read(b[:])
		l.token = "purser-" + hex.EncodeToString(b[:])
	}
	if c.Journal != "" {
		if l.journal, err = meter.OpenJournal(c.Journal); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if l.journal != nil {
			_ = l.journal.Close()
		}
		return nil, fmt.Errorf("gateway: listen: %w", err)
	}
	l.ln = ln
	lctx, cancel := context.WithCancel(ctx)
	l.ctx, l.cancel = lctx, cancel
	l.transport = http.DefaultTransport.(*http.Transport).Clone()
	l.srv = &http.Server{Handler: l, ReadHeaderTimeout: time.Minute, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = l.srv.Serve(ln) }()
	return l, nil
}

// URL is the door's base URL on the host: http://127.0.0.1:PORT.
func (l *Lane) URL() string {
	if l.remote != nil {
		return l.remote.url
	}
	return "http://" + l.ln.Addr().String()
}

// Token is the scoped key the agent uses in place of the provider's (""
// when the lane holds no key). It dies with the lane.
func (l *Lane) Token() string {
	if l.remote != nil {
		return l.remote.token
	}
	return l.token
}

// Protocol is the lane's protocol.
func (l *Lane) Protocol() string { return l.cfg.Protocol }

// Journal is the lane's wire journal ("" for none).
func (l *Lane) Journal() string { return l.cfg.Journal }

// Carried is how many reply bytes the door has read from the provider: the
// provider's progress, for the stall detector.
func (l *Lane) Carried() int64 {
	if l.remote != nil {
		return l.remote.stats().Carried
	}
	return l.carried.Load()
}

// ServeUnix serves the lane on a unix socket at path too (created 0600):
// the door of a box, bound into it and relayed to 127.0.0.1:PORT inside.
func (l *Lane) ServeUnix(path string) error {
	if l.remote != nil {
		return l.remote.serveUnix(path)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("gateway: listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("gateway: %w", err)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		ln.Close()
		return errors.New("gateway: the lane is closed")
	}
	l.extra = append(l.extra, ln)
	l.mu.Unlock()
	go func() { _ = l.srv.Serve(ln) }()
	return nil
}

// LastError is why the last request could not reach the provider, or nil
// when it did (whatever the provider answered).
func (l *Lane) LastError() error {
	if l.remote != nil {
		if e := l.remote.stats().LastErr; e != "" {
			return errors.New(e)
		}
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

// Stats are a lane's counts so far.
type Stats struct {
	Requests int // model requests forwarded
	Refused  int // model requests refused (budget, token, route)
	Booked   int // replies whose usage was booked
	Cut      int // replies cut mid-stream by the lane's end
}

// Stats returns the lane's counts so far.
func (l *Lane) Stats() Stats {
	if l.remote != nil {
		return l.remote.stats().Stats
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Requests: l.requests, Refused: l.refused, Booked: l.booked, Cut: l.cut}
}

// Close ends the lane: its token dies, replies in flight are cut, and its
// listeners and journal close. It returns the first journal write that
// failed, if any. Safe to call twice.
func (l *Lane) Close() error {
	if l.remote != nil {
		return l.remote.close()
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	extra := l.extra
	l.mu.Unlock()
	l.cancel()
	_ = l.srv.Close()
	for _, ln := range extra {
		_ = ln.Close()
	}
	l.inflight.Wait() // every reply's usage booked or cut
	l.transport.CloseIdleConnections()
	if l.journal != nil {
		return l.journal.Close()
	}
	return nil
}

// sameToken compares a presented key with the lane's in constant time.
func (l *Lane) sameToken(got string) bool {
	return l.token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(l.token)) == 1
}
