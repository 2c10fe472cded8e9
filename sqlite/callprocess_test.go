package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/purser-dev/purser"
)

// The process a call runs in is recorded when the call starts and kept when
// it ends, so that a resume can find what a dead owner's call left running.
func TestCallProcessIsRecordedAndKept(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "p.db"))
	c := purser.CallRecord{ID: "c1", TaskID: "t", Iteration: 1, Kind: purser.CallMain, Attempt: 1, StartedAt: time.Unix(1, 0)}
	if err := s.SaveCall(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.Process = "4242 123456"
	if err := s.SaveCall(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.EndedAt, c.Outcome = time.Unix(2, 0), purser.CallOK
	if err := s.SaveCall(ctx, c); err != nil {
		t.Fatal(err)
	}
	calls, err := s.Calls(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Process != "4242 123456" || calls[0].Outcome != purser.CallOK {
		t.Fatalf("calls = %+v, want one ended call with process %q", calls, "4242 123456")
	}
}
