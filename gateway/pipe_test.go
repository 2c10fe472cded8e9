package gateway

import (
	"io"
	"testing"
	"time"
)

// The buffer between the provider and the agent holds at most its limit:
// the provider's side waits for the agent's once it is full, never holds
// more; once the agent is gone, writes are dropped and never wait.
func TestPipeIsBounded(t *testing.T) {
	p := newPipe(64 << 10)
	wrote := make(chan int, 100)
	go func() {
		for i := range 10 {
			p.write(make([]byte, 32<<10))
			wrote <- i
		}
		p.closeWrite(nil)
	}()
	// The two chunks that fit are written once the writer runs (on a loaded
	// machine, not necessarily within a fixed time); then the third waits.
	for deadline := time.Now().Add(10 * time.Second); len(wrote) < 2 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // time for a third write, were it not held
	if n := len(wrote); n != 2 {
		t.Fatalf("%d chunks of 32 KiB written to a 64 KiB buffer nobody reads; want 2", n)
	}
	p.mu.Lock()
	held := p.size
	p.mu.Unlock()
	if held > 64<<10 {
		t.Errorf("holds %d bytes; limit %d", held, 64<<10)
	}
	if b, err := p.read(); err != nil || len(b) != 64<<10 {
		t.Fatalf("read %d bytes, %v", len(b), err)
	}
	p.discard() // the agent hung up: the rest goes nowhere, at once
	deadline := time.After(10 * time.Second)
	for {
		p.mu.Lock()
		ended := p.err != nil
		p.mu.Unlock()
		if ended {
			break
		}
		select {
		case <-deadline:
			t.Fatal("the provider's side still waits after the agent left")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if _, err := p.read(); err != io.EOF {
		t.Errorf("after the end: %v; want io.EOF", err)
	}
}
