package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// DefaultSocket is where `purser gateway` listens when told nowhere:
// $XDG_RUNTIME_DIR/purser/gateway.sock, else the state directory's
// ($XDG_STATE_HOME/purser, ~/.local/state/purser) gateway/gateway.sock.
func DefaultSocket() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "purser", "gateway.sock")
	}
	state := os.Getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(state) {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(state, "purser", "gateway", "gateway.sock")
}

// ErrServiceBusy is a socket another service already answers on.
var ErrServiceBusy = errors.New("another purser gateway answers on this socket")

// Service is the door's shared service (`purser gateway`): it holds the
// provider keys, read from its own environment or the key files lanes
// name, and hosts the lanes of the worker processes of its user, each on
// its own 127.0.0.1 port (and unix socket), while each lane's admission,
// usage and cut stay with the worker's engine over the worker's control
// connection (remotewire.go). A worker's lanes close when its connection
// drops: their tokens die and their replies in flight are cut; the wire
// journal, written by the service, keeps what the provider finished.
type Service struct {
	// Getenv is the environment keys are read from (nil: os.Getenv).
	Getenv func(string) string

	path  string
	ln    net.Listener
	mu    sync.Mutex
	conns map[*serviceConn]struct{}
	wg    sync.WaitGroup
}

// ListenService listens on the unix socket at path, created 0600 in a
// directory that is made 0700 if absent and refused if others may enter
// it. A stale socket (nothing answers) is replaced; a live one is
// ErrServiceBusy.
func ListenService(path string) (*Service, error) {
	if path == "" {
		return nil, errors.New("gateway: the service's socket path is empty")
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("gateway: the service's socket directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("gateway: the service's socket directory: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("gateway: the service's socket directory %s is open to others (mode %04o); want 0700, so only its user reaches the keys", dir, fi.Mode().Perm())
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("gateway: %s exists and is not a socket", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("gateway: %s: %w", path, ErrServiceBusy)
		}
		_ = os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("gateway: listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return &Service{path: path, ln: ln, conns: map[*serviceConn]struct{}{}}, nil
}

// Socket is the path the service listens on.
func (s *Service) Socket() string { return s.path }

// Serve accepts workers' control connections until Close (or ctx's end,
// which closes the service), then closes every lane and returns.
func (s *Service) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = s.Close() })
	defer stop()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.wg.Wait()
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("gateway: accept on %s: %w", s.path, err)
		}
		sc := &serviceConn{svc: s, k: newCtlConn(c), lanes: map[uint64]*serviceLane{}}
		s.mu.Lock()
		if s.conns == nil {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.conns[sc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go sc.run()
	}
}

// Close stops accepting, drops every worker's connection (their lanes
// close) and removes the socket.
func (s *Service) Close() error {
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	if conns == nil {
		return nil
	}
	err := s.ln.Close()
	for sc := range conns {
		sc.k.close()
	}
	_ = os.Remove(s.path)
	return err
}

// Lanes is how many lanes the service hosts now, for tests and the log.
func (s *Service) Lanes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for sc := range s.conns {
		sc.mu.Lock()
		n += len(sc.lanes)
		sc.mu.Unlock()
	}
	return n
}

// serviceConn is one worker's control connection and the lanes it opened.
type serviceConn struct {
	svc   *Service
	k     *ctlConn
	mu    sync.Mutex
	next  uint64
	lanes map[uint64]*serviceLane
}

// serviceLane is a lane hosted for a worker, and what cuts it.
type serviceLane struct {
	lane   *Lane
	cancel context.CancelCauseFunc
}

// errWorkerGone is why a dropped worker's lanes end.
var errWorkerGone = errors.New("purser: budget exhausted (the worker's control connection to the door's service dropped)")

// run serves the connection, then closes its lanes: a worker gone takes
// its tokens with it.
func (sc *serviceConn) run() {
	defer sc.svc.wg.Done()
	ctx, cancel := context.WithCancelCause(context.Background())
	_ = sc.k.serve(func(m ctlMsg) { sc.handle(ctx, m) })
	cancel(errWorkerGone)
	sc.mu.Lock()
	lanes := sc.lanes
	sc.lanes = nil
	sc.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.cancel(errWorkerGone)
			_ = l.lane.Close()
		}()
	}
	wg.Wait()
	sc.svc.mu.Lock()
	delete(sc.svc.conns, sc)
	sc.svc.mu.Unlock()
}

// handle answers one message from the worker. What may wait (a lane's
// close waits for admissions the worker answers on this connection) runs
// on its own goroutine; a cut runs at once.
func (sc *serviceConn) handle(ctx context.Context, m ctlMsg) {
	switch m.Op {
	case "cancel":
		if l := sc.lane(m.Lane); l != nil {
			l.cancel(errors.New(RefusalText(errors.New(m.Text))))
		}
	case "open":
		go sc.open(ctx, m)
	case "unix":
		go func() {
			l := sc.lane(m.Lane)
			if l == nil {
				sc.k.reply(m.ID, ctlMsg{}, errNoLane(m.Lane))
				return
			}
			sc.k.reply(m.ID, ctlMsg{}, l.lane.ServeUnix(m.Text))
		}()
	case "stats":
		l := sc.lane(m.Lane)
		if l == nil {
			sc.k.reply(m.ID, ctlMsg{}, errNoLane(m.Lane))
			return
		}
		sc.k.reply(m.ID, ctlMsg{Stats: statsOf(l.lane)}, nil)
	case "close":
		go sc.closeLane(m)
	case "haskey":
		go sc.hasKey(m)
	default:
		if m.ID != 0 {
			sc.k.reply(m.ID, ctlMsg{}, fmt.Errorf("gateway: the service knows no op %q", m.Op))
		}
	}
}

func errNoLane(id uint64) error {
	return fmt.Errorf("gateway: the service hosts no lane %d of this worker", id)
}

func (sc *serviceConn) lane(id uint64) *serviceLane {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.lanes[id]
}

// open opens a lane for the worker: the key read here, admission and usage
// sent back to the worker.
func (sc *serviceConn) open(ctx context.Context, m ctlMsg) {
	if m.Config == nil {
		sc.k.reply(m.ID, ctlMsg{}, errors.New("gateway: open without a lane's config"))
		return
	}
	c := m.Config
	sc.mu.Lock()
	if sc.lanes == nil {
		sc.mu.Unlock()
		return
	}
	sc.next++
	id := sc.next
	sc.mu.Unlock()
	lc := LaneConfig{Task: c.Task, Protocol: c.Protocol, Upstream: c.Upstream, Key: c.Key, Getenv: sc.svc.Getenv,
		Model: c.Model, Journal: c.Journal, MaxOutputTokens: c.MaxOutputTokens, BufferBytes: c.BufferBytes}
	if c.Admit {
		lc.Admit = remoteAdmitter{k: sc.k, lane: id}
	}
	if c.Report {
		lc.Report = func(ev budget.UsageEvent) { _ = sc.k.send(ctlMsg{Op: "report", Lane: id, Usage: toCtlUsage(ev)}) }
	}
	lctx, cancel := context.WithCancelCause(ctx)
	lane, err := open(lctx, lc, false)
	if err != nil {
		cancel(err)
		sc.k.reply(m.ID, ctlMsg{}, err)
		return
	}
	sc.mu.Lock()
	if sc.lanes == nil { // the worker went while the lane opened
		sc.mu.Unlock()
		cancel(errWorkerGone)
		_ = lane.Close()
		return
	}
	sc.lanes[id] = &serviceLane{lane: lane, cancel: cancel}
	sc.mu.Unlock()
	sc.k.reply(m.ID, ctlMsg{Lane: id, URL: lane.URL(), Token: lane.Token()}, nil)
}

// closeLane closes a worker's lane and answers with its last counts, once
// every reply's usage has been sent before the answer.
func (sc *serviceConn) closeLane(m ctlMsg) {
	sc.mu.Lock()
	l := sc.lanes[m.Lane]
	delete(sc.lanes, m.Lane)
	sc.mu.Unlock()
	if l == nil {
		sc.k.reply(m.ID, ctlMsg{}, errNoLane(m.Lane))
		return
	}
	l.cancel(errors.New("purser: budget exhausted (the call has ended)"))
	err := l.lane.Close()
	sc.k.reply(m.ID, ctlMsg{Stats: statsOf(l.lane)}, err)
}

// hasKey answers whether the service can read a key, by name.
func (sc *serviceConn) hasKey(m ctlMsg) {
	if m.Key == nil {
		sc.k.reply(m.ID, ctlMsg{}, errors.New("gateway: haskey without a key"))
		return
	}
	_, err := m.Key.value(sc.svc.Getenv)
	sc.k.reply(m.ID, ctlMsg{Held: err == nil}, err)
}

func statsOf(l *Lane) *ctlStats {
	st := &ctlStats{Stats: l.Stats(), Carried: l.Carried()}
	if err := l.LastError(); err != nil {
		st.LastErr = err.Error()
	}
	return st
}

// remoteAdmitter admits a hosted lane's requests through its worker's
// engine, over the worker's control connection.
type remoteAdmitter struct {
	k    *ctlConn
	lane uint64
}

// AdmitWire asks the worker; a worker gone refuses the request.
func (a remoteAdmitter) AdmitWire(ctx context.Context, r purser.WireRequest) (purser.WireGrant, error) {
	m, err := a.k.call(ctx, ctlMsg{Op: "admit", Lane: a.lane, Req: &r})
	if errors.Is(err, errCtlClosed) {
		return purser.WireGrant{}, errWorkerGone
	}
	if err != nil {
		return purser.WireGrant{}, err
	}
	if m.Granted == nil {
		return purser.WireGrant{}, errors.New("purser: budget exhausted (the worker granted nothing)")
	}
	g, id, k := m.Granted, m.Grant, a.k
	grant := purser.WireGrant{Model: g.Model, MaxOutputTokens: g.MaxOutputTokens, Actions: g.Actions, Hint: g.Hint, WrapUp: g.WrapUp,
		Release: once(func() { _ = k.send(ctlMsg{Op: "release", Grant: id}) })}
	if g.Used {
		grant.Used = func(ev budget.UsageEvent) { _ = k.send(ctlMsg{Op: "used", Grant: id, Usage: toCtlUsage(ev)}) }
	}
	if g.WrapUp != "" {
		grant.WrapUpDone = func(text string) { _ = k.send(ctlMsg{Op: "wrapdone", Grant: id, Text: text}) }
	}
	return grant, nil
}
