package proc

import (
	"bytes"
	"io"
	"os"
	"sync"
	"time"
)

// Follower reads a file that another process appends to — an agent's
// session log — as it grows, one whole line at a time.
type Follower struct {
	// Find returns the file's path once it can be told, or "".
	Find func() string
	// OnLine is given each whole line, in order, once.
	OnLine func([]byte)

	mu      sync.Mutex
	path    string
	offset  int64
	partial []byte
}

// Poll reads the lines added since the last Poll.
func (f *Follower) Poll() {
	f.mu.Lock()
	defer f.mu.Unlock()
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
	data = append(f.partial, data...)
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		f.partial = data
		return
	}
	f.partial = append([]byte(nil), data[end+1:]...)
	for _, l := range bytes.Split(data[:end], []byte("\n")) {
		if len(l) > 0 && len(l) <= MaxLine {
			f.OnLine(l)
		}
	}
}

// Every polls every d until the returned function is called; that function
// waits for the last poll to end and polls once more, so nothing written
// before it returns is missed.
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
		f.Poll()
	}
}
