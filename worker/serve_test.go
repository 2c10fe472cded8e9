package worker

import (
	"testing"
	"time"

	"github.com/purser-dev/purser/app"
)

// A worker is served only a database opened for the queue, and options that
// let it take a job: it says so rather than block or panic.
func TestServeRefusesWhatCannotWork(t *testing.T) {
	if err := Serve(t.Context(), &app.App{}, Options{Concurrency: 1, Lease: time.Second, Poll: time.Second}); err == nil {
		t.Error("served a database opened without its queue")
	}
}
