package e2e_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// pausingRelay stands between the door and the shared mock, which writes
// each reply at once: it passes every request on, and holds one reply — the
// first to a request carrying a tool result, the agent's second turn —
// after its first SSE event, until the door hangs up. A cap that acts
// while it holds cuts a real agent's reply mid-stream.
type pausingRelay struct {
	mock string
	// nth is the model request (1-based) whose reply is held.
	nth int
	mu  sync.Mutex
	// seen counts the model requests that reached the relay.
	seen int
	// held says the reply is held: its first event went through.
	held bool
	// first is that first event.
	first string
	// heldAt and hungUp are when the reply was held and when the door hung
	// up on it.
	heldAt, hungUp time.Time
	// after counts the model requests that reached the relay once the reply
	// was held: a silent retry of the cut request would be one.
	after int
}

// startPausingRelay starts a relay in front of mock (its base URL) that
// holds the nth model request's reply, and returns it and its base URL.
func startPausingRelay(t *testing.T, mock string, nth int) (*pausingRelay, string) {
	t.Helper()
	r := &pausingRelay{mock: mock, nth: nth}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL
}

// modelRoute reports whether path is a model request's.
func modelRoute(path string) bool {
	return strings.HasSuffix(path, "/messages") || strings.HasSuffix(path, "/responses") ||
		strings.HasSuffix(path, "/chat/completions") || strings.Contains(path, ":generateContent") ||
		strings.Contains(path, ":streamGenerateContent")
}

func (r *pausingRelay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	hold := false
	if modelRoute(req.URL.Path) {
		r.mu.Lock()
		r.seen++
		switch {
		case r.seen > r.nth:
			r.after++
		case r.seen == r.nth:
			hold = true
		}
		r.mu.Unlock()
	}
	out, err := http.NewRequestWithContext(req.Context(), req.Method, r.mock+req.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = req.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	flusher := w.(http.Flusher)
	if !hold || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	first := firstEvent(bufio.NewReader(resp.Body))
	_, _ = io.WriteString(w, first)
	flusher.Flush()
	r.mu.Lock()
	r.held, r.first, r.heldAt = true, first, time.Now()
	r.mu.Unlock()
	<-req.Context().Done() // the door hung up: the reply was cut
	r.mu.Lock()
	r.hungUp = time.Now()
	r.mu.Unlock()
}

// firstEvent reads an SSE stream up to the end of its first event (its
// first blank line).
func firstEvent(br *bufio.Reader) string {
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil || strings.TrimRight(line, "\r\n") == "" && b.Len() > len(line) {
			return b.String()
		}
	}
}

// state is what the relay saw: whether it held a reply, its first event,
// how long it held it, and the model requests after it.
func (r *pausingRelay) state() (held bool, first string, heldFor time.Duration, after int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held && !r.hungUp.IsZero() {
		heldFor = r.hungUp.Sub(r.heldAt)
	}
	return r.held, r.first, heldFor, r.after
}
