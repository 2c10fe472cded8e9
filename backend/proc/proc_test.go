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
// with setsid, after the grace period; output read so far is kept. The
// sleepers would live a minute; the stop comes once the child says "ready".
// The escapee is found by polling /proc while its parent lives: the child
// ignores SIGINT, so the grace is that time, and it is generous because on
// a starved machine (-race, load 17 on 2 cores) 200 ms once went by
// without a poll and the escapee survived.
func TestStopKillsGroupAndEscapees(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := `echo started; sleep 60 & echo $! > inner.pid; setsid sleep 60 & echo $! > escaped.pid; trap '' INT; echo ready; wait`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var lines []string
	start := time.Now()
	out, err := proc.Run(ctx, proc.Command{Path: "sh", Args: []string{"-c", script}, Dir: dir, Grace: 5 * time.Second}, func(l []byte) {
		lines = append(lines, string(l))
		if string(l) == "ready" {
			cancel()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if !out.Stopped || took > 30*time.Second {
		t.Fatalf("stopped %v after %s: want stopped, well before the one-minute sleepers end", out.Stopped, took)
	}
	t.Logf("started, stopped, group and escapee killed: %s", took.Round(time.Millisecond))
	if strings.Join(lines, ",") != "started,ready" {
		t.Fatalf("lines %v", lines)
	}
	for _, f := range []string{"inner.pid", "escaped.pid"} {
		proctest.RequireGone(t, dir, f, 10*time.Second) // a SIGKILLed process takes a moment to go
	}
}

func TestLongLinesAreDropped(t *testing.T) {
	t.Parallel()
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
