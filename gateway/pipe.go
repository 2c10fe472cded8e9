package gateway

import (
	"io"
	"sync"
)

// pipe is the bounded buffer between the provider's reply and the agent:
// the provider's side writes at its own pace until limit bytes wait
// unread, then waits for the agent's side; once the agent's side is gone
// (discard) writes are dropped and never wait.
type pipe struct {
	mu      sync.Mutex
	cond    sync.Cond
	chunks  [][]byte
	size    int
	limit   int
	err     error // the write side's end (io.EOF when the reply ended)
	dropped bool
}

func newPipe(limit int) *pipe {
	p := &pipe{limit: limit}
	p.cond.L = &p.mu
	return p
}

// write queues b (which the pipe then owns), waiting while the buffer is
// full. A chunk larger than the limit passes alone.
func (p *pipe) write(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.size > 0 && p.size+len(b) > p.limit && !p.dropped {
		p.cond.Wait()
	}
	if p.dropped {
		return
	}
	p.chunks = append(p.chunks, b)
	p.size += len(b)
	p.cond.Broadcast()
}

// closeWrite ends the write side with err (io.EOF for the reply's end).
func (p *pipe) closeWrite(err error) {
	if err == nil {
		err = io.EOF
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
	p.cond.Broadcast()
}

// read returns what waits (joined), or the write side's end once all was read.
func (p *pipe) read() ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.chunks) == 0 && p.err == nil {
		p.cond.Wait()
	}
	if len(p.chunks) == 0 {
		return nil, p.err
	}
	var out []byte
	if len(p.chunks) == 1 {
		out = p.chunks[0]
	} else {
		out = make([]byte, 0, p.size)
		for _, c := range p.chunks {
			out = append(out, c...)
		}
	}
	p.chunks, p.size = p.chunks[:0], 0
	p.cond.Broadcast()
	return out, nil
}

// discard drops what waits and every later write: the agent is gone.
func (p *pipe) discard() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropped, p.chunks, p.size = true, nil, 0
	p.cond.Broadcast()
}
