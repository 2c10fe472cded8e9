package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/purser-dev/purser"
)

// ErrServiceDown is a lane asked of the door's service when the service
// does not answer: the call is refused, never given an in-process lane
// that would need the provider key in the worker.
var ErrServiceDown = errors.New("the door's service does not answer")

// ServiceDownError says which socket did not answer and what to run.
type ServiceDownError struct {
	Socket string
	Err    error
}

func (e *ServiceDownError) Error() string {
	return fmt.Sprintf("gateway: the door's service at %s does not answer (%v); start it with `purser gateway --socket %s`, or run without it (no gateway.socket in purser.yaml, no --gateway, no PURSER_GATEWAY)", e.Socket, e.Err, e.Socket)
}

// Unwrap makes the error ErrServiceDown.
func (e *ServiceDownError) Unwrap() error { return ErrServiceDown }

// service is the process's door: "" for in-process lanes, else the
// socket of the service every lane is opened on, and its connection.
var service struct {
	mu     sync.Mutex
	socket string
	client *remoteClient
}

// UseService makes every lane Open opens from now on a lane of the door's
// service (`purser gateway`) listening on socket: the service holds the
// provider keys and the lane's listener; admission, usage and the cut stay
// with this process over one control connection. "" goes back to
// in-process lanes. A process calls it once, before its first lane: a
// change drops the connection to the former service, whose lanes then
// close.
func UseService(socket string) {
	service.mu.Lock()
	defer service.mu.Unlock()
	if socket == service.socket {
		return
	}
	if service.client != nil {
		service.client.k.close()
		service.client = nil
	}
	service.socket = socket
}

// ServiceSocket is the socket UseService set ("" when lanes are
// in-process).
func ServiceSocket() string {
	service.mu.Lock()
	defer service.mu.Unlock()
	return service.socket
}

// serviceClient is the process's connection to the service, dialled on
// first use and again after it dropped.
func serviceClient() (*remoteClient, error) {
	service.mu.Lock()
	defer service.mu.Unlock()
	if c := service.client; c != nil {
		select {
		case <-c.k.done:
		default:
			return c, nil
		}
	}
	conn, err := net.DialTimeout("unix", service.socket, 5*time.Second)
	if err != nil {
		return nil, &ServiceDownError{Socket: service.socket, Err: err}
	}
	c := &remoteClient{k: newCtlConn(conn), lanes: map[uint64]*remoteLane{}, grants: map[uint64]purser.WireGrant{}}
	go c.run()
	service.client = c
	return c, nil
}

// ServiceHasKey asks the service at socket whether it can read key (by its
// name; the value never leaves the service): nil when it can, else why
// not, or a *ServiceDownError.
func ServiceHasKey(ctx context.Context, socket string, key Key) error {
	conn, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return &ServiceDownError{Socket: socket, Err: err}
	}
	k := newCtlConn(conn)
	go func() { _ = k.serve(func(ctlMsg) {}) }()
	defer k.close()
	_, err = k.call(ctx, ctlMsg{Op: "haskey", Key: &key})
	if errors.Is(err, errCtlClosed) {
		return &ServiceDownError{Socket: socket, Err: err}
	}
	return err
}

// remoteClient is this process's end of its control connection: the lanes
// it opened on the service and the grants the service may call back.
type remoteClient struct {
	k         *ctlConn
	mu        sync.Mutex
	lanes     map[uint64]*remoteLane
	grants    map[uint64]purser.WireGrant
	nextGrant uint64
}

// remoteLane is a Lane hosted by the service.
type remoteLane struct {
	c          *remoteClient
	id         uint64
	ctx        context.Context
	url, token string
	admit      purser.WireAdmitter
	report     purser.UsageFunc
	stop       func() bool // the cut's watch on ctx
	mu         sync.Mutex
	last       ctlStats // the counts last heard
	closed     bool
}

// run reads the connection; when it drops, every hold a grant kept is
// released (the service cut the replies) and the lanes say why.
func (c *remoteClient) run() {
	err := c.k.serve(c.handle)
	c.mu.Lock()
	grants, lanes := c.grants, c.lanes
	c.grants, c.lanes = map[uint64]purser.WireGrant{}, map[uint64]*remoteLane{}
	c.mu.Unlock()
	for _, g := range grants {
		if g.Release != nil {
			g.Release()
		}
	}
	for _, l := range lanes {
		l.mu.Lock()
		if l.last.LastErr == "" {
			l.last.LastErr = "gateway: the control connection to the door's service dropped: " + err.Error()
		}
		l.mu.Unlock()
	}
}

// handle answers the service: an admission on its own goroutine (the
// engine may wait), usage and releases at once and in order, so that a
// lane's close, answered after them, finds them all booked.
func (c *remoteClient) handle(m ctlMsg) {
	switch m.Op {
	case "admit":
		go c.admit(m)
	case "report":
		c.mu.Lock()
		l := c.lanes[m.Lane]
		c.mu.Unlock()
		if l != nil && m.Usage != nil && l.report != nil {
			l.report(m.Usage.event())
		}
	case "used", "wrapdone", "release":
		c.mu.Lock()
		g, ok := c.grants[m.Grant]
		if m.Op == "release" {
			delete(c.grants, m.Grant)
		}
		c.mu.Unlock()
		switch {
		case !ok:
		case m.Op == "used" && g.Used != nil && m.Usage != nil:
			g.Used(m.Usage.event())
		case m.Op == "wrapdone" && g.WrapUpDone != nil:
			g.WrapUpDone(m.Text)
		case m.Op == "release" && g.Release != nil:
			g.Release()
		}
	default:
		if m.ID != 0 {
			c.k.reply(m.ID, ctlMsg{}, fmt.Errorf("gateway: the worker knows no op %q", m.Op))
		}
	}
}

// admit has the lane's admitter admit a request, the grant kept for the
// service to call back.
func (c *remoteClient) admit(m ctlMsg) {
	c.mu.Lock()
	l := c.lanes[m.Lane]
	c.mu.Unlock()
	if l == nil || l.admit == nil || m.Req == nil {
		c.k.reply(m.ID, ctlMsg{}, errors.New(RefusalText(errors.New("the lane is closed"))))
		return
	}
	g, err := l.admit.AdmitWire(l.ctx, *m.Req)
	if err != nil {
		c.k.reply(m.ID, ctlMsg{}, errors.New(RefusalText(err)))
		return
	}
	c.mu.Lock()
	c.nextGrant++
	id := c.nextGrant
	c.grants[id] = g
	c.mu.Unlock()
	c.k.reply(m.ID, ctlMsg{Grant: id, Granted: &ctlGrant{Model: g.Model, MaxOutputTokens: g.MaxOutputTokens, Actions: g.Actions,
		Hint: g.Hint, WrapUp: g.WrapUp, Used: g.Used != nil}}, nil)
}

// openRemote opens c on the service: the key goes by name, admission and
// usage stay here, and ctx's end cuts the lane there.
func openRemote(ctx context.Context, c LaneConfig) (*Lane, error) {
	cl, err := serviceClient()
	if err != nil {
		return nil, err
	}
	cfg := &ctlConfig{Task: c.Task, Protocol: c.Protocol, Upstream: c.Upstream, Model: c.Model, Journal: c.Journal, Key: c.Key,
		Admit: c.Admit != nil, Report: c.Report != nil, MaxOutputTokens: c.MaxOutputTokens, BufferBytes: c.BufferBytes}
	m, err := cl.k.call(ctx, ctlMsg{Op: "open", Config: cfg})
	if errors.Is(err, errCtlClosed) {
		return nil, &ServiceDownError{Socket: ServiceSocket(), Err: err}
	}
	if err != nil {
		return nil, err
	}
	rl := &remoteLane{c: cl, id: m.Lane, ctx: ctx, url: m.URL, token: m.Token, admit: c.Admit, report: c.Report}
	cl.mu.Lock()
	cl.lanes[rl.id] = rl
	cl.mu.Unlock()
	rl.stop = context.AfterFunc(ctx, func() {
		_ = cl.k.send(ctlMsg{Op: "cancel", Lane: rl.id, Text: RefusalText(context.Cause(ctx))})
	})
	return &Lane{cfg: c, remote: rl}, nil
}

// stats asks the service for the lane's counts; when it cannot answer (the
// lane closed, the service gone) the last heard.
func (r *remoteLane) stats() ctlStats {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if !closed {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := r.c.k.call(ctx, ctlMsg{Op: "stats", Lane: r.id})
		cancel()
		if err == nil && m.Stats != nil {
			r.mu.Lock()
			r.last = *m.Stats
			r.mu.Unlock()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// serveUnix has the service serve the lane on the unix socket at path.
func (r *remoteLane) serveUnix(path string) error {
	_, err := r.c.k.call(r.ctx, ctlMsg{Op: "unix", Lane: r.id, Text: path})
	return err
}

// close closes the lane on the service; its answer comes after every
// reply's usage was booked here.
func (r *remoteLane) close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.stop()
	m, err := r.c.k.call(context.Background(), ctlMsg{Op: "close", Lane: r.id})
	r.c.mu.Lock()
	delete(r.c.lanes, r.id)
	r.c.mu.Unlock()
	if m.Stats != nil {
		r.mu.Lock()
		r.last = *m.Stats
		r.mu.Unlock()
	}
	if errors.Is(err, errCtlClosed) {
		return nil // the service cut and closed it when the connection dropped
	}
	return err
}
