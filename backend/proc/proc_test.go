package proc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/internal/proctest"
)

// Stopping a child ends its whole group, and descendants that left the group
// with setsid, within the grace period; output read so far is kept.
func TestStopKillsGroupAndEscapees(t *testing.T) {
	dir := t.TempDir()
	script := `echo started; sleep 60 & echo $! > inner.pid; setsid sleep 60 & echo $! > escaped.pid; trap '' INT; sleep 0.2; echo ready; wait`
	ctx, cancel := context.WithCancel(context.Background())
	var lines []string
	var start time.Time
	out, err := proc.Run(ctx, proc.Command{Path: "sh", Args: []string{"-c", script}, Dir: dir, Grace: 200 * time.Millisecond}, func(l []byte) {
		lines = append(lines, string(l))
		// Stopped once its trap is set: a fixed delay is too short when the
		// machine is loaded.
		if string(l) == "ready" {
			start = time.Now()
			cancel()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Stopped || time.Since(start) > 2*time.Second {
		t.Fatalf("stopped %v after %s", out.Stopped, time.Since(start))
	}
	if strings.Join(lines, ",") != "started,ready" {
		t.Fatalf("lines %v", lines)
	}
	for _, f := range []string{"inner.pid", "escaped.pid"} {
		proctest.RequireGone(t, dir, f, time.Second)
	}
}

func TestLongLinesAreDropped(t *testing.T) {
	var lines []int
	_, err := proc.Run(context.Background(), proc.Command{Path: "sh", Args: []string{"-c", "echo a; head -c 17000000 /dev/zero | tr '\\0' x; echo; echo b"}},
		func(l []byte) { lines = append(lines, len(l)) })
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || lines[0] != 1 || lines[1] != 1 {
		t.Fatalf("line lengths %v: want the 17 MB line dropped, the others kept", lines)
	}
}
