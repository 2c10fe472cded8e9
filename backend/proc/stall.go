package proc

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/purser-dev/purser"
)

// Stall returns the *purser.StallError of a child ended by the stall
// detector, or nil.
func (o Outcome) Stall() error {
	if !o.Stalled {
		return nil
	}
	return &purser.StallError{Window: o.stall, Source: "the agent (its output, its session file, its provider's replies)"}
}

// Offset is how much of its file the follower has read so far: what a
// stall detector watches (Command.Progress) to see an agent's session file
// grow.
func (f *Follower) Offset() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.offset
}

// watchStall closes stalled once window has passed with neither activity
// nor progress changing, unless done is closed first.
func watchStall(window time.Duration, activity *atomic.Int64, progress func() int64, done <-chan struct{}, stalled chan<- struct{}) {
	tick := min(max(window/10, 10*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	snapshot := func() (int64, int64) {
		var p int64
		if progress != nil {
			p = progress()
		}
		return activity.Load(), p
	}
	lastA, lastP := snapshot()
	quietSince := time.Now()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			a, p := snapshot()
			if a != lastA || p != lastP {
				lastA, lastP, quietSince = a, p, now
				continue
			}
			if now.Sub(quietSince) >= window {
				close(stalled)
				return
			}
		}
	}
}

// countingReader counts the bytes read through it into n.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// countingWriter counts the bytes written through it into n.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.w.Write(p)
}
