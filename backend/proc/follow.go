package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/purser-dev/purser/internal/tick"
)

// followChunk is the most a Follower reads in one go: a file that grows
// without end (a link to /dev/zero, a runaway writer) costs bounded memory.
const followChunk = 1 << 20

// DefaultFollowLimit is the most a Follower reads of one file in all, unless
// its MaxTotal says otherwise.
const DefaultFollowLimit = 256 << 20

// Line is one line of a followed file.
type Line struct {
	N       int    // its number in the file, from 1
	Text    []byte // the line without its newline; nil when TooLong
	TooLong bool   // longer than the Follower's MaxLine: its text was dropped
}

// Follower reads a file that another process appends to — an agent's
// session log, the exec backend's usage file — as it grows, one whole line
// at a time.
type Follower struct {
	// Find returns the file's path once it can be told, or "".
	Find func() string
	// OnLine is given each line, in order, once: blank and too-long lines
	// included, so that line numbers stay true.
	OnLine func(Line)
	// MaxLine is the longest line passed on with its text (0: MaxLine).
	MaxLine int
	// MaxTotal is the most read of the file in all (0: DefaultFollowLimit);
	// past it, the file is read no further and Err says so.
	MaxTotal int64

	mu      sync.Mutex
	refused error // why the file is read no further, if it is not
	path    string
	offset  int64
	n       int
	partial []byte // the unfinished last line, unless it is too long
	tooLong bool   // the unfinished last line is already too long
}

// Poll reads the lines added since the last Poll. A last line without its
// newline waits for it.
func (f *Follower) Poll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.pollLocked() {
	}
}

// pollLocked reads what was added, in chunks, and reports whether it
// stopped with more left to read. The file is opened anew each time without
// following a link and without blocking, and only a regular file is read: a
// writer that swaps it for a link, a FIFO or a device is refused, for good.
func (f *Follower) pollLocked() (more bool) {
	if f.refused != nil {
		return false
	}
	if f.path == "" {
		if f.path = f.Find(); f.path == "" {
			return false
		}
	}
	file, err := os.OpenFile(f.path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, syscall.ELOOP):
		f.refused = fmt.Errorf("%s was replaced by a symbolic link: not followed, read no further", f.path)
		return false
	case err != nil:
		return false // not there (yet): the writer may create it
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return false
	}
	if !fi.Mode().IsRegular() {
		f.refused = fmt.Errorf("%s is not a regular file (%s): read no further", f.path, fi.Mode().Type())
		return false
	}
	limit := f.MaxTotal
	if limit <= 0 {
		limit = DefaultFollowLimit
	}
	if f.offset >= limit {
		f.refused = fmt.Errorf("%s grew past %d MiB: read no further", f.path, limit>>20)
		return false
	}
	buf := make([]byte, min(followChunk, limit-f.offset))
	n, err := file.ReadAt(buf, f.offset)
	data := buf[:n]
	f.offset += int64(n)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			f.keep(data)
			break
		}
		f.keep(data[:i])
		data = data[i+1:]
		f.endLine()
	}
	return n == len(buf) && err != io.EOF
}

// Err says why the file is read no further (a link, a FIFO, too much), or nil.
func (f *Follower) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

// keep adds b to the unfinished line, dropping the text of a line that
// grows past MaxLine.
func (f *Follower) keep(b []byte) {
	limit := f.MaxLine
	if limit <= 0 {
		limit = MaxLine
	}
	switch {
	case f.tooLong:
	case len(f.partial)+len(b) > limit:
		f.partial, f.tooLong = nil, true
	default:
		f.partial = append(f.partial, b...)
	}
}

func (f *Follower) endLine() {
	f.n++
	l := Line{N: f.n, Text: f.partial, TooLong: f.tooLong}
	f.partial, f.tooLong = nil, false
	f.OnLine(l)
}

// Every polls every d until the returned function is called. Call that
// function once the writer has exited: it waits for the last poll to end,
// polls once more, and passes on a last line that never got its newline,
// since nothing will add to it now.
func (f *Follower) Every(d time.Duration) (stop func()) {
	stopPolling := tick.Every(d, func() { f.Poll() })
	return func() {
		stopPolling()
		f.mu.Lock()
		defer f.mu.Unlock()
		for f.pollLocked() {
		}
		if len(f.partial) > 0 || f.tooLong {
			f.endLine()
		}
	}
}
