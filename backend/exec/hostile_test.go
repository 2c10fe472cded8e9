package exec_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
)

// hangBound is how long a call may take before it counts as hung for good:
// the point of these tests, far above what a call needs.
const hangBound = 30 * time.Second

type callResult struct {
	res purser.CallResult
	err error
}

// callWithin runs one call and fails the test if it has not returned
// within hangBound.
func callWithin(t *testing.T, ctx context.Context, script string, c *collector) (purser.CallResult, error) {
	t.Helper()
	b, ws := agent(t, script)
	done := make(chan callResult, 1)
	go func() {
		res, err := b.Call(ctx, purser.CallRequest{Workspace: ws, Model: "m"}, c.report)
		done <- callResult{res, err}
	}()
	select {
	case r := <-done:
		return r.res, r.err
	case <-time.After(hangBound):
		t.Fatalf("the call has not returned after %s: Purser hangs on the usage file", hangBound)
		return purser.CallResult{}, nil
	}
}

// Issue 15 #9: whatever the command puts at $PURSER_USAGE_FILE, the call
// returns, what was reported before stays, and the note says the file was
// refused.
func TestHostileUsageFile(t *testing.T) {
	for _, tc := range []struct {
		name, script, note string
	}{
		{"replaced by a FIFO", `echo '{"inputTokens": 7}' >> "$PURSER_USAGE_FILE"; sleep 0.3
rm "$PURSER_USAGE_FILE"; mkfifo "$PURSER_USAGE_FILE"`, "not a regular file"},
		{"symlinked to /dev/zero", `echo '{"inputTokens": 7}' >> "$PURSER_USAGE_FILE"; sleep 0.3
rm "$PURSER_USAGE_FILE"; ln -s /dev/zero "$PURSER_USAGE_FILE"; sleep 0.5`, "symbolic link"},
		{"1.5 GB line", `echo '{"inputTokens": 7}' >> "$PURSER_USAGE_FILE"; sleep 0.3
truncate -s 1500M "$PURSER_USAGE_FILE"; echo '{"inputTokens": 1000000}' >> "$PURSER_USAGE_FILE"; sleep 0.5`, "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			var c collector
			res, _ := callWithin(t, context.Background(), tc.script, &c)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 512<<20 {
				t.Errorf("the call allocated %d MiB reading the usage file", grew>>20)
			}
			if tok := c.totals().Tokens; tok != 7 {
				t.Errorf("%d tokens recorded, want the 7 reported before the file was replaced", tok)
			}
			if !strings.Contains(res.Note, "PURSER_USAGE_FILE") || !strings.Contains(res.Note, tc.note) {
				t.Errorf("note %q, want it to say the usage file was refused (%s)", res.Note, tc.note)
			}
		})
	}
}

// Cancellation works whatever the usage file is: a FIFO nobody writes to
// does not hold the call.
func TestCancelWithFIFOUsageFile(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var c collector
	go func() {
		time.Sleep(500 * time.Millisecond)
		cancel()
	}()
	_, err := callWithin(t, ctx, `rm "$PURSER_USAGE_FILE"; mkfifo "$PURSER_USAGE_FILE"; sleep 60`, &c)
	if err == nil {
		t.Fatal("a cancelled call returned no error")
	}
}

// An unfinished last line is read where it is, never written back through
// whatever now sits at the usage file's path.
func TestUnfinishedLineIsNotWrittenThroughASymlink(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "bashrc")
	if err := os.WriteFile(outside, []byte("ssh-key\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c collector
	res, err := callWithin(t, context.Background(), `printf '{"inputTokens": 5}' >> "$PURSER_USAGE_FILE"; sleep 0.3
rm "$PURSER_USAGE_FILE"; ln -s `+outside+` "$PURSER_USAGE_FILE"`, &c)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(outside); string(got) != "ssh-key\n" {
		t.Fatalf("a file outside was written through the usage file's symlink: %q", got)
	}
	if tok := c.totals().Tokens; tok != 5 {
		t.Fatalf("%d tokens recorded, want the unfinished line's 5 (note %q)", tok, res.Note)
	}
}
