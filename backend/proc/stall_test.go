package proc_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/proc"
)

// A child that says nothing for the stall window is ended as stalled, not
// left to the call's timeout; the stall is a transient error.
func TestSilentChildIsEndedAsStalled(t *testing.T) {
	t.Parallel()
	out, err := proc.Run(context.Background(), proc.Command{Path: "sh", Args: []string{"-c", "echo hello; exec sleep 300"},
		Grace: time.Second, Stall: 300 * time.Millisecond}, func([]byte) {})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Stalled || out.Stopped {
		t.Fatalf("outcome %+v: want stalled, not stopped", out)
	}
	serr := out.Stall()
	if !errors.Is(serr, purser.ErrStalled) || !errors.Is(serr, purser.ErrTransient) {
		t.Fatalf("Stall() = %v: want a stall, transient", serr)
	}
}

// Output on stdout or stderr keeps a child alive however long it runs; so
// does Progress changing while the child is silent (its session file
// growing). Each child outlives the stall window, and is never silent for
// more than a sixth of it.
func TestActivityKeepsChildAlive(t *testing.T) {
	t.Parallel()
	const window = 3 * time.Second
	loop := func(stream string) string {
		return `i=0; while [ $i -lt 10 ]; do echo tick` + stream + `; sleep 0.5; i=$((i+1)); done`
	}
	var progress atomic.Int64
	for _, tc := range []struct {
		name     string
		script   string
		progress func() int64
	}{
		{"stdout", loop(""), nil},
		{"stderr", loop(" >&2"), nil},
		{"session file", `sleep 5`, func() int64 { return progress.Add(1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := proc.Run(context.Background(), proc.Command{Path: "sh", Args: []string{"-c", tc.script},
				Grace: time.Second, Stall: window, Progress: tc.progress}, func([]byte) {})
			if err != nil {
				t.Fatal(err)
			}
			if out.Stalled || out.WaitErr != nil || out.Stall() != nil {
				t.Fatalf("outcome %+v: want the child to run to its end", out)
			}
		})
	}
}

// Without a stall window, a silent child is left alone.
func TestNoStallWindowNoStall(t *testing.T) {
	t.Parallel()
	out, err := proc.Run(context.Background(), proc.Command{Path: "sh", Args: []string{"-c", "sleep 1"}}, func([]byte) {})
	if err != nil || out.Stalled || out.WaitErr != nil {
		t.Fatalf("outcome %+v, %v: want a clean exit", out, err)
	}
}

// A follower's offset grows as its file does: what the stall detector
// watches for an agent's session file.
func TestFollowerOffsetGrowsWithTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session.jsonl")
	f := &proc.Follower{Find: func() string { return path }, OnLine: func(proc.Line) {}}
	f.Poll()
	if f.Offset() != 0 {
		t.Fatalf("offset %d before the file exists", f.Offset())
	}
	if err := os.WriteFile(path, []byte("{\"a\":1}\n{\"b\":2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.Poll()
	if f.Offset() != 16 {
		t.Fatalf("offset %d, want the 16 bytes written", f.Offset())
	}
}
