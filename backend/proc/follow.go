package proc

import (
	"bytes"
	"io"
	"os"
	"sync"
	"time"
)

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

	mu      sync.Mutex
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
	f.pollLocked()
}

func (f *Follower) pollLocked() {
	if f.path == "" {
		if f.path = f.Find(); f.path == "" {
			return
		}
	}
	file, err := os.Open(f.path)
	if err != nil {
		return
	}
	defer file.Close()
	if _, err := file.Seek(f.offset, io.SeekStart); err != nil {
		return
	}
	data, _ := io.ReadAll(io.LimitReader(file, 64<<20))
	f.offset += int64(len(data))
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			f.keep(data)
			return
		}
		f.keep(data[:i])
		data = data[i+1:]
		f.endLine()
	}
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
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f.Poll()
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.pollLocked()
		if len(f.partial) > 0 || f.tooLong {
			f.endLine()
		}
	}
}
