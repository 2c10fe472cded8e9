package meter

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purser-dev/purser/budget"
)

// The APIs whose replies a Tap reads, as APIOf tells them from a path.
const (
	APIAnthropic = apiAnthropic
	APIResponses = apiResponses
	APIChat      = apiChat
	APIGemini    = apiGemini
)

// APIOf tells the API of a request from its path ("" for none the meter
// reads), and the model when the path names it (Gemini).
func APIOf(path string) (api, model string) { return apiOf(path) }

// Usage is one reply's usage as a Tap reads it: in Purser's shape (input
// counts every prompt token, cache reads and writes among them; output
// counts reasoning), under the model the request named.
type Usage struct{ e entry }

// Counted is the usage of a reply cut before the provider said any: the
// door's own count of the request's input, under its model, which the
// provider bills once it started the reply.
func Counted(api, model string, input int64) Usage {
	return Usage{e: entry{At: time.Now().UTC(), API: api, Model: model, Input: max(input, 0)}}
}

// Event is the usage as the engine books it.
func (u Usage) Event() budget.UsageEvent { return u.e.event() }

// Tap reads the usage of one reply as its bytes pass (Write), whatever
// carries them: the meter's proxy, or the gateway's door. Each reply's
// usage is handed to the tap's func the moment it is whole. It holds at
// most about 3×maxEvent bytes whatever the reply's size. Not safe for
// concurrent use: one reply, one reader.
type Tap struct {
	r reader
}

// NewTap reads a reply of api (APIAnthropic, …) to a request that named
// reqModel; sse says the reply is an event stream. onUsage is called from
// Write or End.
func NewTap(api, reqModel string, sse bool, onUsage func(Usage)) *Tap {
	t := &Tap{}
	t.r = reader{carried: new(atomic.Int64)}
	t.r.rec = func(e entry) {
		if e.Input <= 0 && e.Output <= 0 {
			return
		}
		t.r.booked++
		e.At = time.Now().UTC()
		onUsage(Usage{e})
	}
	t.r.api, t.r.reqModel, t.r.sse = api, reqModel, sse
	return t
}

// Write reads the next bytes of the reply. It never fails.
func (t *Tap) Write(p []byte) (int, error) {
	t.r.carried.Add(int64(len(p)))
	t.r.feed(p)
	return len(p), nil
}

// End is the reply's end: a JSON reply is read now, and a stream's last
// event if it was not ended by a blank line.
func (t *Tap) End() {
	if !t.r.ended {
		t.r.ended = true
		t.r.end()
	}
}

// Cut is the reply's end before its usage was whole (the stream was cut,
// by the door or by the provider dropping it, or it ended without its
// closing event): it books what the reply had said of its usage so far —
// Anthropic's message_start (input and cache tokens, which the provider
// bills once it started the reply), Gemini's usage of its last chunk (the
// prompt, from the first) — and reports whether it had said any. A reply
// whose usage was booked already books nothing more: Cut after End books
// only what End did not.
func (t *Tap) Cut() bool {
	r := &t.r
	r.ended = true
	if r.booked > 0 {
		return false
	}
	switch {
	case r.api == apiAnthropic && r.msg != nil && !r.recorded:
		r.rec(r.msg.entry(firstOf(r.msgModel, r.reqModel)))
		r.recorded = true
	case r.api == apiGemini && r.gemini != nil:
		r.rec(r.gemini.entry(r.reqModel))
		r.gemini = nil
	default:
		return false
	}
	return r.booked > 0
}

// Booked reports whether any usage of the reply was handed on.
func (t *Tap) Booked() bool { return t.r.booked > 0 }

// held is how many bytes the tap holds (for the tests of its bound).
func (t *Tap) held() int {
	return cap(t.r.line) + cap(t.r.data) + cap(t.r.head) + cap(t.r.tail)
}

// Journal is a wire journal being written: one line per reply's usage,
// token counts and model names only, each written before Record returns
// (it survives Purser being killed). Safe for concurrent use.
type Journal struct {
	path string
	mu   sync.Mutex
	file *os.File
	err  error
	n    int
}

// OpenJournal creates (0600, in a 0700 directory) or appends to path.
func OpenJournal(path string) (*Journal, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("meter: journal directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("meter: journal: %w", err)
	}
	return &Journal{path: path, file: f}, nil
}

// Path is the journal's file.
func (j *Journal) Path() string { return j.path }

// Record appends one reply's usage.
func (j *Journal) Record(u Usage) {
	b, _ := json.Marshal(u.e)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.file == nil {
		return
	}
	if _, err := j.file.Write(append(b, '\n')); err != nil {
		if j.err == nil {
			j.err = fmt.Errorf("meter: writing the journal: %w", err)
		}
		return
	}
	j.n++
}

// Replies is how many replies were journalled.
func (j *Journal) Replies() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.n
}

// Close closes the file; it returns the first write that failed, if any.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.file != nil {
		if err := j.file.Close(); err != nil && j.err == nil {
			j.err = err
		}
		j.file = nil
	}
	return j.err
}
