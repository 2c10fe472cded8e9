package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The egress proxy is how a box reaches what its Allow names (a package
// registry): Purser listens on a unix socket, bound into the box at
// egressSocket, and the box's init relays 127.0.0.1:egressPort inside to it
// (as for the door). The box's environment points HTTP(S)_PROXY there. The
// proxy speaks HTTP CONNECT and plain HTTP with absolute URLs, resolves
// names outside the box (the box has no DNS), lets through exactly the
// listed host:port, refuses anything else with 403 saying what to add, and
// logs and counts every connection. One proxy serves every box of this
// process with the same allow-list; it lives as long as the process.

// Limits of one proxy; variables so tests can shorten them.
var (
	egressMaxConns      = 128              // connections at once; more get 503
	egressIdle          = 2 * time.Minute  // a tunnel with no byte either way this long is closed
	egressHeaderTimeout = 30 * time.Second // to send the request line and headers
	egressDialTimeout   = 15 * time.Second
	egressMaxHeader     = int64(64 << 10) // the request line and headers
)

// egress is one proxy, for one allow-list.
type egress struct {
	allow   allowList
	socket  string
	ln      net.Listener
	sem     chan struct{}
	idle    time.Duration
	log     *slog.Logger
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	dial    func(ctx context.Context, addr string) (net.Conn, error)
}

// egresses are this process's proxies, by allow-list.
var egresses struct {
	sync.Mutex
	dir string
	m   map[string]*egress
}

// egressFor returns the running proxy for allow, starting it if needed.
func egressFor(allow []string) (*egress, error) {
	l, err := parseAllowList(allow)
	if err != nil {
		return nil, fmt.Errorf("sandbox: network.allow: %w", err)
	}
	keys := make([]string, len(l))
	for i, e := range l {
		keys[i] = e.String()
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	key := strings.Join(keys, " ")
	egresses.Lock()
	defer egresses.Unlock()
	if e := egresses.m[key]; e != nil {
		return e, nil
	}
	if egresses.dir == "" {
		// A private directory (0700) for the sockets: short, since a unix
		// socket's path is at most 107 bytes.
		if egresses.dir, err = SocketDir("purser-egress-", len("999.sock")); err != nil {
			return nil, fmt.Errorf("sandbox: making the egress proxy's directory: %w", err)
		}
	}
	if egresses.m == nil {
		egresses.m = map[string]*egress{}
	}
	sock := filepath.Join(egresses.dir, fmt.Sprintf("%d.sock", len(egresses.m)))
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("sandbox: opening the egress proxy: %w", err)
	}
	var d net.Dialer
	e := &egress{allow: l, socket: sock, ln: ln, sem: make(chan struct{}, egressMaxConns),
		idle: egressIdle, log: slog.Default().With("component", "sandbox egress"),
		resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
		dial: func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) },
	}
	egresses.m[key] = e
	go e.serve()
	return e, nil
}

// CloseEgress stops this process's egress proxies and removes the
// directory of their sockets, so that a run leaves none behind in
// $TMPDIR. Purser calls it as it exits; a box started after it gets new
// proxies.
func CloseEgress() {
	egresses.Lock()
	defer egresses.Unlock()
	for _, e := range egresses.m {
		_ = e.ln.Close()
	}
	if egresses.dir != "" {
		_ = os.RemoveAll(egresses.dir)
	}
	egresses.dir, egresses.m = "", nil
}

// serve accepts until the listener is closed.
func (e *egress) serve() {
	for {
		c, err := e.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: do not spin
			continue
		}
		select {
		case e.sem <- struct{}{}:
			go func() {
				defer func() { <-e.sem }()
				e.handle(c)
			}()
		default:
			go func() {
				e.refuse(c, http.StatusServiceUnavailable, fmt.Sprintf("purser: the box's egress proxy holds %d connections already, its most; try again when some have closed\n", cap(e.sem)))
				countRefused("(too many connections)")
			}()
		}
	}
}

// outcome is what became of one connection, for the log and the counts.
type outcome struct {
	dest      string
	allowed   bool
	reason    string
	up, down  int64
	startedAt time.Time
}

// handle serves one connection from a box: one request, then a tunnel.
func (e *egress) handle(c net.Conn) {
	defer c.Close()
	o := outcome{startedAt: time.Now()}
	defer func() { e.record(o) }()
	_ = c.SetReadDeadline(time.Now().Add(egressHeaderTimeout))
	// The request line and headers are bounded (ReadRequest itself is
	// not); the bound is lifted for what follows them.
	head := &io.LimitedReader{R: c, N: egressMaxHeader}
	br := bufio.NewReader(head)
	req, err := http.ReadRequest(br)
	if err != nil {
		o.dest, o.reason = "(unreadable request)", err.Error()
		e.refuse(c, http.StatusBadRequest, "purser: the box's egress proxy could not read the request: "+err.Error()+"\n")
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	head.N = math.MaxInt64
	hostport, err := target(req)
	if err != nil {
		o.dest, o.reason = "(bad target)", err.Error()
		e.refuse(c, http.StatusBadRequest, "purser: the box's egress proxy: "+err.Error()+"\n")
		return
	}
	host, port, err := destination(hostport)
	if err != nil {
		o.dest, o.reason = "(bad destination)", err.Error()
		e.refuse(c, http.StatusBadRequest, "purser: the box's egress proxy: "+err.Error()+"\n")
		return
	}
	o.dest = net.JoinHostPort(host, port)
	entry, ok := e.allow.match(host, port)
	if !ok {
		o.reason = "not in sandbox.network.allow"
		e.refuse(c, http.StatusForbidden, e.notAllowed(o.dest))
		return
	}
	up, err := e.connect(req.Context(), entry, host, port)
	if err != nil {
		o.reason = err.Error()
		status := http.StatusBadGateway
		if errors.Is(err, errUnreachable) {
			status = http.StatusForbidden
		}
		e.refuse(c, status, fmt.Sprintf("purser: the box's egress proxy did not reach %s: %v\n", o.dest, err))
		return
	}
	defer up.Close()
	o.allowed = true
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		o.up, o.down = tunnel(c, br, up, e.idle)
		return
	}
	o.up, o.down = forward(c, req, up, e.idle)
}

// target is where a proxy request goes: a CONNECT's authority, or a plain
// request's absolute http:// URL (its port 80 unless said).
func target(req *http.Request) (string, error) {
	if req.Method == http.MethodConnect {
		return req.Host, nil
	}
	if !req.URL.IsAbs() || req.URL.Scheme != "http" || req.URL.Host == "" {
		return "", fmt.Errorf("a plain request through the proxy needs an absolute http:// URL, not %q (use CONNECT for https)", req.RequestURI)
	}
	if req.URL.Port() == "" {
		return net.JoinHostPort(req.URL.Hostname(), "80"), nil
	}
	return req.URL.Host, nil
}

// errUnreachable marks a listed name whose addresses a name may not lead
// to (see reachable).
var errUnreachable = errors.New("unreachable by name")

// connect resolves host outside the box and dials the first address that
// answers. A name leads only to public addresses (reachable); an address
// listed literally is dialled as listed.
func (e *egress) connect(ctx context.Context, entry allowEntry, host, port string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, egressDialTimeout)
	defer cancel()
	var addrs []netip.Addr
	if entry.ip {
		addrs = []netip.Addr{netip.MustParseAddr(host)}
	} else {
		found, err := e.resolve(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", host, err)
		}
		for _, a := range found {
			if reachable(a) {
				addrs = append(addrs, a.Unmap())
			}
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("%w: %s resolves only to loopback, private or other non-public addresses %v, which a name in the allow-list never leads to (Purser's own listeners live there); list the address itself if that is what you mean", errUnreachable, host, found)
		}
	}
	var last error
	for _, a := range addrs {
		c, err := e.dial(ctx, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// notAllowed is the body of a 403 for a destination not listed.
func (e *egress) notAllowed(dest string) string {
	listed := make([]string, len(e.allow))
	for i, a := range e.allow {
		listed[i] = a.String()
	}
	return fmt.Sprintf("purser: the box may not reach %s: it is not in sandbox.network.allow (allowed: %s).\n"+
		"To let it through, add it to the sandbox: of purser.yaml (the project's, or the backend's):\n"+
		"  sandbox: {mode: on, network: {allow: [%q]}}\n", dest, strings.Join(listed, ", "), dest)
}

// refuse answers a request the proxy does not carry out.
func (e *egress) refuse(c net.Conn, status int, body string) {
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	_ = c.Close()
}

// maxReason bounds a refusal's reason in the log.
const maxReason = 300

// record logs a connection (never what it carried) and counts it.
func (e *egress) record(o outcome) {
	d := time.Since(o.startedAt)
	if o.allowed {
		e.log.Info("egress", "destination", o.dest, "allowed", true, "bytes_up", o.up, "bytes_down", o.down, "duration", d)
		countAllowed(o.dest, o.up, o.down)
		return
	}
	reason := o.reason
	if len(reason) > maxReason { // it may quote what the box sent
		reason = reason[:maxReason] + "…"
	}
	e.log.Warn("egress refused", "destination", o.dest, "allowed", false, "reason", reason, "duration", d)
	countRefused(o.dest)
}

// tunnel copies between the box's connection (whose reader br may hold
// bytes already read) and up, both ways, half-closes included, until both
// directions end or neither carries a byte for idle. It returns the
// bytes sent up and down.
func tunnel(c net.Conn, br *bufio.Reader, up net.Conn, idle time.Duration) (int64, int64) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	go idleWatch(&last, idle, done, c, up)
	var sent int64
	upDone := make(chan struct{})
	go func() {
		sent, _ = io.Copy(activeWriter{up, &last}, br)
		closeWrite(up)
		close(upDone)
	}()
	got, _ := io.Copy(activeWriter{c, &last}, up)
	closeWrite(c)
	<-upDone
	close(done)
	return sent, got
}

// forward sends a plain request to up in origin form, asking the server to
// close after it, and copies the answer back. Only one request per
// connection: the next one may name another host.
func forward(c net.Conn, req *http.Request, up net.Conn, idle time.Duration) (int64, int64) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	defer close(done)
	go idleWatch(&last, idle, done, c, up)
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	req.Close = true
	cw := &countWriter{w: activeWriter{up, &last}}
	if err := req.Write(cw); err != nil {
		return cw.n, 0
	}
	got, _ := io.Copy(activeWriter{c, &last}, up)
	return cw.n, got
}

// idleWatch closes both connections once no byte has moved for idle.
func idleWatch(last *atomic.Int64, idle time.Duration, done <-chan struct{}, conns ...net.Conn) {
	t := time.NewTicker(idle / 4)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			if now.Sub(time.Unix(0, last.Load())) >= idle {
				for _, c := range conns {
					_ = c.Close()
				}
				return
			}
		}
	}
}

// activeWriter notes the time of every write.
type activeWriter struct {
	w    io.Writer
	last *atomic.Int64
}

func (a activeWriter) Write(p []byte) (int, error) {
	n, err := a.w.Write(p)
	a.last.Store(time.Now().UnixNano())
	return n, err
}

// countWriter counts what passes.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// closeWrite half-closes c where it can.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
