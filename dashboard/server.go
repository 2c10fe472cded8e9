package dashboard

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/report"
)

//go:embed static
var staticFiles embed.FS

// DefaultPollInterval is how often a live page's stream reads the store.
const DefaultPollInterval = 500 * time.Millisecond

// ErrTokenRequired is returned by CheckBind for a non-loopback address
// without a token.
var ErrTokenRequired = errors.New("a token is required to listen on an address other than loopback")

// ErrWeakToken is returned by CheckBind for a token shorter than
// MinTokenLength.
var ErrWeakToken = errors.New("the token is too short")

// MinTokenLength is the fewest characters a token may have: anything
// shorter is guessed by a page that tries tokens (openssl rand -hex 16
// makes one of 32).
const MinTokenLength = 16

// Options configure a Handler.
type Options struct {
	// Addr is the address the dashboard listens on (host:port), which sets
	// the Host names it answers to: localhost and loopback addresses always,
	// the listen address when it is one, any IP literal and this machine's
	// host name when it listens on every address. Empty means any IP
	// literal and localhost, but no other name.
	// Requests for any other name are refused (421): they come from a page
	// that rebound its own name to this machine.
	Addr string
	// Hosts are further names it answers to (a name the machine is reached
	// by through a proxy or DNS).
	Hosts []string
	// Token, when set, must come with every request: as
	// "Authorization: Bearer TOKEN", as the query parameter token=TOKEN, or
	// in the cookie a valid query token sets (a browser's requests for the
	// page's script and its event stream cannot send headers).
	Token string
	// PollInterval is how often a live stream reads the store; 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	// Logger receives errors reading the store; nil discards them.
	Logger *slog.Logger
	// Forecast, when set, gives each task not DONE its spend forecast
	// (forecast.go); nil: the page shows none.
	Forecast Forecaster
	// Budgets, when set, is where the named budgets' tree is read (the
	// budgets database, when it is apart from the project's); nil: the
	// store's own.
	Budgets report.NamedBudgetReader
}

// CheckBind refuses to listen on a non-loopback address without a token:
// the dashboard shows agents' output and spend to whoever can reach it. It
// refuses a token shorter than MinTokenLength anywhere: a short one guards
// nothing.
func CheckBind(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: want host:port: %w", addr, err)
	}
	if token != "" {
		if n := len([]rune(token)); n < MinTokenLength {
			return fmt.Errorf("%w: %d characters, want at least %d characters (make one with: openssl rand -hex 16)", ErrWeakToken, n, MinTokenLength)
		}
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("address %q: %w (give --token or PURSER_SERVE_TOKEN)", addr, ErrTokenRequired)
}

// NewHandler returns the dashboard's HTTP handler over store: the page and
// its assets at /, the snapshot as JSON at /api/snapshot, the live stream
// at /events and Prometheus metrics at /metrics.
func NewHandler(store purser.StoreReader, o Options) http.Handler {
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{store: store, o: o, hosts: newHosts(o.Addr, o.Hosts)}
	h.feed = newFeed(h.load, o.PollInterval)
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(store, o.Logger))

	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.HandleFunc("GET /api/snapshot", h.snapshot)
	mux.HandleFunc("GET /events", h.events)
	mux.Handle("GET /metrics", promhttp.HandlerFor(&markedGatherer{g: reg, store: store}, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	return h.secure(mux)
}

// tokenCookie carries the token for a browser that opened /?token=TOKEN.
const tokenCookie = "purser_token"

type handler struct {
	store   purser.StoreReader
	o       Options
	hosts   hosts
	feed    *feed
	budgets budgetTree
	last    lastBody
}

// secure checks the Host (against DNS rebinding), then the token, in
// constant time, and sets headers that keep
// the page from loading anything but its own files.
func (h *handler) secure(next http.Handler) http.Handler {
	want := []byte(h.o.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		if !h.hosts.allows(r.Host) {
			refuseHost(w, r.Host)
			return
		}
		if len(want) > 0 {
			got, fromQuery := r.URL.Query().Get("token"), true
			if c, err := r.Cookie(tokenCookie); err == nil && got == "" {
				got, fromQuery = c.Value, false
			}
			if auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
				got, fromQuery = auth, false
			}
			if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="purser"`)
				http.Error(w, "unauthorized: give the token as Authorization: Bearer TOKEN or ?token=TOKEN", http.StatusUnauthorized)
				return
			}
			if fromQuery {
				// The page's own requests (its script, style and event
				// stream) then carry the token without putting it in more
				// URLs.
				http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: got, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (h *handler) load(ctx context.Context) ([]byte, error) {
	now := time.Now()
	mark, marked := changeMark(ctx, h.store)
	if body := h.last.get(mark, marked, now); body != nil {
		return body, nil
	}
	snap, err := Load(ctx, h.store)
	if err != nil {
		return nil, err
	}
	treeRead := true
	if snap.Budgets, err = h.budgets.get(ctx, h.namedReader(), now); err != nil {
		// The runs are still worth showing: the tree is left out, said
		// in the log, and read again at the next poll.
		h.o.Logger.Error("read the named budgets", "err", err)
		snap.Budgets = []report.BudgetTreeJSON{}
		treeRead = false
	}
	addForecasts(ctx, &snap, h.o.Forecast)
	body, err := json.Marshal(snap)
	if err == nil && marked && treeRead {
		// Aged from when it was built, so that a slow read (a loaded
		// machine) is still served again for a while.
		h.last.put(mark, body, time.Now())
	}
	return body, err
}

func (h *handler) snapshot(w http.ResponseWriter, r *http.Request) {
	body, err := h.load(r.Context())
	if err != nil {
		h.o.Logger.Error("read the store", "err", err)
		http.Error(w, "could not read the store: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// events streams the snapshot as Server-Sent Events: one "snapshot" event
// now and one each time the store's content changes (the feed reads it every
// poll interval); an "error" event when the store cannot be read.
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	updates, unsubscribe := h.feed.subscribe()
	defer unsubscribe()
	for {
		select {
		case <-r.Context().Done():
			return
		case u := <-updates:
			var err error
			if u.err != nil {
				h.o.Logger.Error("read the store", "err", u.err)
				err = writeEvent(w, "error", []byte(u.err.Error()))
			} else {
				err = writeEvent(w, "snapshot", u.body)
			}
			if err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// writeEvent writes one SSE event; data lines may not hold a newline.
func writeEvent(w http.ResponseWriter, name string, data []byte) error {
	var b bytes.Buffer
	b.WriteString("event: " + name + "\n")
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}
