package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// The control protocol between a worker and `purser gateway` (the door's
// shared service) is JSON lines on one unix-socket connection per worker
// process, both ways, multiplexed by id. A message that expects an answer
// carries a non-zero ID; its answer is a "reply" with the same ID. The ops:
//
//	worker → service
//	  open     {id, config}     a lane; reply {id, lane, url, token} or {id, err}
//	  unix     {id, lane, text} serve the lane on the unix socket at text too
//	  stats    {id, lane}       reply {id, stats}
//	  cancel   {lane, text}     the call's context ended: cut the lane, text why
//	  close    {id, lane}       close the lane; reply {id, stats} once every
//	                            reply's usage has been sent
//	  haskey   {id, key}        reply {id, held} or {id, err}: can the service
//	                            read that key (named, never its value)?
//	  reply    {id, grant, granted} or {id, err}: the answer to an admit
//
//	service → worker
//	  admit    {id, lane, req}  admit a model request (the worker's engine)
//	  report   {lane, usage}    a reply's usage (LaneConfig.Report)
//	  used     {grant, usage}   WireGrant.Used
//	  wrapdone {grant, text}    WireGrant.WrapUpDone
//	  release  {grant}          WireGrant.Release
//	  reply    {id, ...}        the answer to a worker's request
//
// No message ever carries a key's value or a request's body.
type ctlMsg struct {
	Op      string              `json:"op"`
	ID      uint64              `json:"id,omitempty"`
	Lane    uint64              `json:"lane,omitempty"`
	Grant   uint64              `json:"grant,omitempty"`
	Text    string              `json:"text,omitempty"`
	Err     string              `json:"err,omitempty"`
	Config  *ctlConfig          `json:"config,omitempty"`
	Key     *Key                `json:"key,omitempty"`
	Held    bool                `json:"held,omitempty"`
	URL     string              `json:"url,omitempty"`
	Token   string              `json:"token,omitempty"`
	Req     *purser.WireRequest `json:"req,omitempty"`
	Granted *ctlGrant           `json:"granted,omitempty"`
	Usage   *ctlUsage           `json:"usage,omitempty"`
	Stats   *ctlStats           `json:"stats,omitempty"`
}

// ctlConfig is the part of a LaneConfig that crosses to the service: the
// key by name (the service reads its value from its own environment or the
// file), Admit and Report as flags (they stay in the worker).
type ctlConfig struct {
	Task, Protocol, Upstream, Model, Journal string
	Key                                      Key
	Admit, Report                            bool
	MaxOutputTokens                          int64
	BufferBytes                              int
}

// ctlGrant is a WireGrant without its functions: the service calls them
// back by the grant's id.
type ctlGrant struct {
	Model           string
	MaxOutputTokens int64
	Actions         []string
	Hint            string
	WrapUp          string
	Used            bool
}

// ctlStats is what a worker's lane shows of the service's.
type ctlStats struct {
	Stats
	Carried int64
	LastErr string
}

// ctlUsage is a budget.UsageEvent as plain numbers (its CostSource
// marshals to a name no decoder reads back).
type ctlUsage struct {
	In, Out, CacheRead, CacheWrite, Reasoning, CacheWrite1h, RequestIn int64
	USD, SettlesUnknown                                                int64
	CostSource                                                         uint8
	ServiceTier, Model, Agent, PriceSource                             string
	Elapsed                                                            time.Duration
	IterationEnd                                                       bool
}

func toCtlUsage(e budget.UsageEvent) *ctlUsage {
	return &ctlUsage{In: e.InputTokens, Out: e.OutputTokens, CacheRead: e.CacheReadTokens, CacheWrite: e.CacheWriteTokens,
		Reasoning: e.ReasoningTokens, CacheWrite1h: e.CacheWrite1hTokens, RequestIn: e.RequestInputTokens,
		USD: int64(e.USD), SettlesUnknown: e.SettlesUnknown, CostSource: uint8(e.CostSource), ServiceTier: e.ServiceTier,
		Model: e.Model, Agent: e.Agent, PriceSource: e.PriceSource, Elapsed: e.Elapsed, IterationEnd: e.IterationEnd}
}

func (u *ctlUsage) event() budget.UsageEvent {
	return budget.UsageEvent{InputTokens: u.In, OutputTokens: u.Out, CacheReadTokens: u.CacheRead, CacheWriteTokens: u.CacheWrite,
		ReasoningTokens: u.Reasoning, CacheWrite1hTokens: u.CacheWrite1h, RequestInputTokens: u.RequestIn,
		USD: budget.USD(u.USD), SettlesUnknown: u.SettlesUnknown, CostSource: budget.CostSource(u.CostSource), ServiceTier: u.ServiceTier,
		Model: u.Model, Agent: u.Agent, PriceSource: u.PriceSource, Elapsed: u.Elapsed, IterationEnd: u.IterationEnd}
}

// maxCtlLine bounds one control message (a wrap-up turn's text is the
// largest thing one carries).
const maxCtlLine = 16 << 20

// errCtlClosed is a call on a control connection that has ended.
var errCtlClosed = errors.New("the control connection is closed")

// ctlConn is one end of a control connection: a writer shared by every
// goroutine, the calls waiting for their reply, and a reader that hands
// every other message to handle, in order.
type ctlConn struct {
	c       net.Conn
	wmu     sync.Mutex
	enc     *json.Encoder
	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan ctlMsg
	done    chan struct{}
}

func newCtlConn(c net.Conn) *ctlConn {
	return &ctlConn{c: c, enc: json.NewEncoder(c), pending: map[uint64]chan ctlMsg{}, done: make(chan struct{})}
}

// send writes m.
func (k *ctlConn) send(m ctlMsg) error {
	k.wmu.Lock()
	defer k.wmu.Unlock()
	select {
	case <-k.done:
		return errCtlClosed
	default:
	}
	if err := k.enc.Encode(m); err != nil {
		return fmt.Errorf("writing to the control connection: %w", err)
	}
	return nil
}

// call sends m with a fresh id and waits for its reply, ctx's end or the
// connection's. A reply's Err comes back as an error.
func (k *ctlConn) call(ctx context.Context, m ctlMsg) (ctlMsg, error) {
	ch := make(chan ctlMsg, 1)
	k.mu.Lock()
	if k.pending == nil {
		k.mu.Unlock()
		return ctlMsg{}, errCtlClosed
	}
	k.next++
	m.ID = k.next
	k.pending[m.ID] = ch
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		if k.pending != nil {
			delete(k.pending, m.ID)
		}
		k.mu.Unlock()
	}()
	if err := k.send(m); err != nil {
		return ctlMsg{}, err
	}
	select {
	case r := <-ch:
		if r.Err != "" {
			return r, errors.New(r.Err)
		}
		return r, nil
	case <-k.done:
		return ctlMsg{}, errCtlClosed
	case <-ctx.Done():
		return ctlMsg{}, context.Cause(ctx)
	}
}

// reply answers the request id with m (its Err set by err).
func (k *ctlConn) reply(id uint64, m ctlMsg, err error) {
	m.Op, m.ID = "reply", id
	if err != nil {
		m.Err = err.Error()
	}
	_ = k.send(m)
}

// serve reads messages until the connection ends, handing replies to their
// callers and every other message to handle, in the order they came. It
// returns why the connection ended.
func (k *ctlConn) serve(handle func(ctlMsg)) error {
	r := bufio.NewReaderSize(k.c, 64<<10)
	var err error
	for {
		var line []byte
		if line, err = readLine(r); err != nil {
			break
		}
		var m ctlMsg
		if err = json.Unmarshal(line, &m); err != nil {
			err = fmt.Errorf("a control message that is not JSON: %w", err)
			break
		}
		if m.Op == "reply" {
			k.mu.Lock()
			ch := k.pending[m.ID]
			k.mu.Unlock()
			select {
			case ch <- m: // buffered for the one reply; a second is dropped
			default:
			}
			continue
		}
		handle(m)
	}
	k.close()
	return err
}

// close ends the connection; calls waiting fail with errCtlClosed.
func (k *ctlConn) close() {
	_ = k.c.Close() // first: a write blocked on a peer that reads no more fails
	k.mu.Lock()
	if k.pending != nil {
		k.pending = nil
		close(k.done)
	}
	k.mu.Unlock()
}

// readLine reads one line of at most maxCtlLine bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, more, err := r.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, part...)
		if len(line) > maxCtlLine {
			return nil, fmt.Errorf("a control message over %d bytes", maxCtlLine)
		}
		if !more {
			return line, nil
		}
	}
}
