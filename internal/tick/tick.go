// Package tick runs a function on a ticker until told to stop: the engine's
// heartbeats, the worker's lease renewals and the session-file follower's
// polls share it.
package tick

import "time"

// Every calls fn every d on a goroutine of its own until the returned
// function is called; that function returns once fn is no longer running,
// so nothing fn touches is used after stop returns.
func Every(d time.Duration, fn func()) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fn()
			}
		}
	}()
	return func() { close(done); <-stopped }
}
