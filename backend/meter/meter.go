// Package meter counts an agent CLI's model usage at the wire. A Meter is a
// local HTTP proxy put between the CLI and its provider (the CLI's base URL
// points at it): every reply the provider finishes sending passes through
// Purser's own process, which writes the reply's usage to a journal file the
// moment the reply's last usage figure arrives.
//
// The CLI's own session files record a reply only once the CLI has read and
// processed it; a CLI that dies in between (because Purser was killed, and
// the CLI with it) takes the reply's usage with it. The journal closes that
// window down to the moment between the provider's last byte reaching this
// machine and Purser reading it: a resume recovers from the journal what the
// session files lack (see RecoverSpend in the CLI backends).
//
// The journal holds token counts and model names only — never bodies,
// headers or keys.
package meter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/purser-dev/purser/budget"
)

// maxEvent bounds what is buffered to read one reply's usage whole: an SSE
// event (OpenAI's response.completed repeats the whole reply) or a JSON
// body. A larger one is passed on with only its first headKeep and last
// tailKeep bytes held, and its usage read from those (usage is the last
// field of every provider's reply object): a hostile upstream's 60 MB
// events cost a stream at most about 3×maxEvent, never their size.
const maxEvent = 1 << 20

// headKeep and tailKeep are what is held of an event larger than maxEvent.
const (
	headKeep = 4 << 10
	tailKeep = 64 << 10
)

// maxRequest bounds a request body read to learn its model.
const maxRequest = 64 << 20

// Meter is a running proxy that journals the usage of the replies it
// carries. It is safe for concurrent use (a CLI may make several requests at
// once).
type Meter struct {
	journal string
	ln      net.Listener
	srv     *http.Server
	proxy   *httputil.ReverseProxy
	// transport is the meter's own: sharing a pool of connections with
	// other code reused connections under the proxy's reads (seen as
	// replies cut short with the shared mock).
	transport *http.Transport

	carried atomic.Int64 // bytes of replies passed on

	mu      sync.Mutex
	file    *os.File
	err     error // the first journal write that failed
	n       int   // replies journalled
	lastErr error // the last request's failure to reach the provider (nil once one got through)
}

// Start journals to journal (created 0600, appended to) the usage of every
// reply it carries to upstream, the provider's base URL (its path, e.g.
// /v1, is kept before each request's path). It listens on 127.0.0.1 on a
// free port; URL says where.
func Start(upstream, journal string) (*Meter, error) {
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("meter: upstream %q: want an http or https URL", upstream)
	}
	if err := os.MkdirAll(filepath.Dir(journal), 0o700); err != nil {
		return nil, fmt.Errorf("meter: journal directory: %w", err)
	}
	f, err := os.OpenFile(journal, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("meter: journal: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("meter: listen: %w", err)
	}
	// The transport has no ErrorLog: what it says goes to the standard
	// logger, which would print it raw on purser's stderr.
	quietTransportLogs()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	m := &Meter{journal: journal, ln: ln, file: f, transport: transport}
	m.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			// The proxy must read what it carries: the transport asks for
			// gzip itself and hands over the body decompressed.
			r.Out.Header.Del("Accept-Encoding")
		},
		ModifyResponse: m.tap,
		// Its own connections: they end with the call (Close).
		Transport:     transport,
		FlushInterval: -1, // streamed replies reach the CLI as they come
		ErrorHandler:  m.unreachable,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: time.Minute, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// URL is the base URL to give the CLI in place of the provider's.
func (m *Meter) URL() string { return "http://" + m.ln.Addr().String() }

// Journal is the file the usage is written to.
func (m *Meter) Journal() string { return m.journal }

// Carried is how many bytes of replies the meter has passed on so far: the
// provider's progress, which the stall detector watches besides the CLI's
// own output (a long reply a CLI prints only at its end is not a stall).
func (m *Meter) Carried() int64 { return m.carried.Load() }

// Replies is how many replies' usage was journalled so far.
func (m *Meter) Replies() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

// unreachable answers a request the provider could not be reached for with
// a 502 that says why, and keeps the error: the CLI sees a 502 where it
// would have seen the refused connection itself, so its backend asks
// LastError what really happened.
func (m *Meter) unreachable(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() == nil { // not the CLI hanging up
		m.mu.Lock()
		m.lastErr = err
		m.mu.Unlock()
	}
	w.WriteHeader(http.StatusBadGateway)
	_, _ = io.WriteString(w, "purser wire meter: the provider could not be reached: "+err.Error())
}

// LastError is why the last request could not reach the provider, or nil
// when it did (whatever the provider answered).
func (m *Meter) LastError() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastErr
}

// Close stops the proxy, ending any request still in flight, and closes the
// journal. It returns the first journal write that failed, if any.
func (m *Meter) Close() error {
	_ = m.srv.Close()
	m.transport.CloseIdleConnections()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.file != nil {
		if err := m.file.Close(); err != nil && m.err == nil {
			m.err = err
		}
		m.file = nil
	}
	return m.err
}

// entry is one journal line: one reply's usage, in Purser's shape (input
// counts every prompt token, cache reads and writes among them; output
// counts reasoning).
type entry struct {
	At         time.Time `json:"at"`
	API        string    `json:"api"`
	Model      string    `json:"model"`
	Input      int64     `json:"input"`
	Output     int64     `json:"output"`
	CacheRead  int64     `json:"cacheRead,omitempty"`
	CacheWrite int64     `json:"cacheWrite,omitempty"`
	CacheWr1h  int64     `json:"cacheWrite1h,omitempty"`
	Reasoning  int64     `json:"reasoning,omitempty"`
	Tier       string    `json:"serviceTier,omitempty"`
}

func (e entry) event() budget.UsageEvent {
	ev := budget.UsageEvent{InputTokens: max(e.Input, 0), OutputTokens: max(e.Output, 0), Model: e.Model, ServiceTier: e.Tier}
	ev.CacheReadTokens = min(max(e.CacheRead, 0), ev.InputTokens)
	ev.CacheWriteTokens = min(max(e.CacheWrite, 0), ev.InputTokens-ev.CacheReadTokens)
	ev.CacheWrite1hTokens = min(max(e.CacheWr1h, 0), ev.CacheWriteTokens)
	ev.ReasoningTokens = min(max(e.Reasoning, 0), ev.OutputTokens)
	return ev
}

// record appends one reply's usage to the journal. A write reaches the
// kernel before record returns: it survives Purser being killed.
func (m *Meter) record(e entry) {
	if e.Input <= 0 && e.Output <= 0 {
		return
	}
	e.At = time.Now().UTC()
	b, _ := json.Marshal(e)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.file == nil {
		return
	}
	if _, err := m.file.Write(append(b, '\n')); err != nil {
		if m.err == nil {
			m.err = fmt.Errorf("meter: writing the journal: %w", err)
		}
		return
	}
	m.n++
}

// tap puts a usage reader on the body of a reply whose API it knows.
func (m *Meter) tap(resp *http.Response) error {
	m.mu.Lock()
	m.lastErr = nil
	m.mu.Unlock()
	req := resp.Request
	if resp.StatusCode/100 != 2 || req == nil || req.Method != http.MethodPost {
		resp.Body = &counter{body: resp.Body, n: &m.carried}
		return nil
	}
	api, model := route(req)
	if api == "" {
		resp.Body = &counter{body: resp.Body, n: &m.carried}
		return nil
	}
	r := &reader{body: resp.Body, rec: m.record, carried: &m.carried, api: api, reqModel: model,
		sse: strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")}
	resp.Body = r
	return nil
}

// MaxJournal bounds the journal Read reads: a call's replies take a line of
// about 200 bytes each, so a journal this large is no journal of ours.
const MaxJournal = 16 << 20

// maxJournalLine bounds one line of a journal.
const maxJournalLine = 64 << 10

// Read returns a journal's replies as usage events, one per reply, in the
// order they were written. A journal that does not exist holds nothing.
// Lines that cannot be read (a torn last line, Purser killed mid-write; a
// line someone else wrote) are skipped: ReadCounted says how many.
func Read(journal string) ([]budget.UsageEvent, error) {
	evs, _, err := ReadCounted(journal)
	return evs, err
}

// ReadCounted is Read, also returning how many lines it skipped as
// unreadable. Only a regular file is read (never a FIFO, a device such as
// /dev/zero, or a directory), and only up to MaxJournal bytes: a path
// recorded with a call is read after a crash, and must not hang or
// exhaust the resume.
func ReadCounted(journal string) ([]budget.UsageEvent, int, error) {
	f, err := os.OpenFile(journal, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("meter: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("meter: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("meter: %s: not a regular file (%s)", journal, fi.Mode().Type())
	}
	if fi.Size() > MaxJournal {
		return nil, 0, fmt.Errorf("meter: %s: %d bytes, more than a journal holds (%d)", journal, fi.Size(), MaxJournal)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxJournal+1))
	if err != nil {
		return nil, 0, fmt.Errorf("meter: %w", err)
	}
	if len(b) > MaxJournal {
		return nil, 0, fmt.Errorf("meter: %s: more than a journal holds (%d bytes)", journal, MaxJournal)
	}
	var out []budget.UsageEvent
	skipped := 0
	for _, l := range bytes.Split(b, []byte{'\n'}) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var e entry
		if len(l) > maxJournalLine || json.Unmarshal(l, &e) != nil {
			skipped++
			continue
		}
		out = append(out, e.event())
	}
	return out, skipped, nil
}

// Dir is where journals are kept unless a backend is told otherwise:
// $XDG_STATE_HOME/purser/wire, or ~/.local/state/purser/wire.
func Dir() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "purser", "wire")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "purser", "wire")
	}
	return filepath.Join(os.TempDir(), "purser-wire")
}

var journals atomic.Int64

// NewJournal names a fresh journal file in dir for one call of backend.
func NewJournal(dir, backend string) string {
	return filepath.Join(dir, fmt.Sprintf("%s-%s-%d-%d.jsonl", backend, time.Now().UTC().Format("20060102T150405.000000000"),
		os.Getpid(), journals.Add(1)))
}

// Prune removes the journals in dir older than age: calls that long gone
// were recovered, or never will be.
func Prune(dir string, age time.Duration) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > age {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// counter passes a body on, counting its bytes.
type counter struct {
	body io.ReadCloser
	n    *atomic.Int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.body.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *counter) Close() error { return c.body.Close() }
