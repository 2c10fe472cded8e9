package tick

import (
	"sync/atomic"
	"testing"
	"time"
)

// Stop returns only once fn is no longer running, and fn is not called
// after it.
func TestStopWaitsForTheCallInFlightAndEndsTheCalls(t *testing.T) {
	var calls, running atomic.Int32
	entered := make(chan struct{}, 1)
	stop := Every(time.Millisecond, func() {
		running.Add(1)
		defer running.Add(-1)
		calls.Add(1)
		select {
		case entered <- struct{}{}:
		default:
		}
		time.Sleep(5 * time.Millisecond)
	})
	<-entered
	stop()
	if running.Load() != 0 {
		t.Fatal("stop returned while fn was running")
	}
	n := calls.Load()
	time.Sleep(20 * time.Millisecond)
	if calls.Load() != n {
		t.Fatalf("fn was called %d more times after stop", calls.Load()-n)
	}
}
