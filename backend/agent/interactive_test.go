package agent_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/agent"
	"github.com/purser-dev/purser/budget"
)

// interactiveAgent is an interactive backend running testdata/interactive.py
// on pipes the test holds: what the test types, what the agent says, and
// the signals the terminal passes on.
type interactiveAgent struct {
	b       *agent.Backend
	typed   io.WriteCloser
	said    *bufio.Scanner
	signals chan os.Signal
}

func newInteractive(t *testing.T) *interactiveAgent {
	t.Helper()
	t.Setenv("PURSER_TEST_ANTHROPIC_KEY", realKey)
	script, _ := filepath.Abs("testdata/interactive.py")
	b, err := agent.New(purser.BackendSpec{Type: "agent", Options: map[string]any{"wire": "anthropic", "command": []any{script},
		"upstream": "http://127.0.0.1:9", "key": map[string]any{"env": "PURSER_TEST_ANTHROPIC_KEY"}}})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	a := &interactiveAgent{b: b, typed: inW, said: bufio.NewScanner(outR), signals: make(chan os.Signal, 1)}
	b.Interactive(&agent.Terminal{Stdin: inR, Stdout: outW, Stderr: io.Discard, Signals: a.signals, Grace: 100 * time.Millisecond})
	t.Cleanup(func() { inW.Close(); outR.Close() })
	return a
}

// call runs the session; its outcome comes on the returned channel.
func (a *interactiveAgent) call(ctx context.Context, t *testing.T) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := a.b.Call(ctx, purser.CallRequest{TaskID: "s1", Prompt: "never given to an interactive agent", Workspace: t.TempDir()}, func(budget.UsageEvent) {})
		done <- err
	}()
	return done
}

func (a *interactiveAgent) expect(t *testing.T, want string) {
	t.Helper()
	if !a.said.Scan() {
		t.Fatalf("the agent ended before %q: %v", want, a.said.Err())
	}
	if got := a.said.Text(); got != want {
		t.Fatalf("the agent said %q, want %q", got, want)
	}
}

// An interactive session: the terminal's lines reach the agent (never the
// call's prompt), a Ctrl-C passed on reaches it, and when the call's
// context ends the agent is given its grace, then SIGTERM, then — since it
// ignores SIGTERM — SIGKILL, and the call ends with the context's cause.
func TestInteractiveSessionEndsWithItsContext(t *testing.T) {
	a := newInteractive(t)
	ctx, end := context.WithCancelCause(context.Background())
	done := a.call(ctx, t)
	a.expect(t, "ready")
	_, _ = io.WriteString(a.typed, "hello\n")
	a.expect(t, "heard hello")
	a.signals <- syscall.SIGINT
	a.expect(t, "got INT")
	hard := errors.New("the session's hard cap")
	start := time.Now()
	end(hard)
	select {
	case err := <-done:
		if !errors.Is(err, hard) {
			t.Errorf("the call ended with %v, want the context's cause", err)
		}
		if took := time.Since(start); took < 100*time.Millisecond+agent.StopGrace {
			t.Errorf("the agent was killed %s after the end, before its grace and SIGTERM's", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent, which ignores SIGTERM, was not killed")
	}
}

// The agent's own exit ends the session: 0 is a call done; another status
// is a failure of the call, never a transient fault that a retry would
// take up by starting the user's session over.
func TestInteractiveSessionEndsWithTheAgent(t *testing.T) {
	for _, tc := range []struct{ line, wantErr string }{{"bye", ""}, {"fail", "interactive.py (interactive): exit status 4"}} {
		a := newInteractive(t)
		done := a.call(context.Background(), t)
		a.expect(t, "ready")
		_, _ = io.WriteString(a.typed, tc.line+"\n")
		a.expect(t, "heard "+tc.line)
		select {
		case err := <-done:
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: the call ended with %v, want %q", tc.line, err, tc.wantErr)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the call did not end with the agent", tc.line)
		}
	}
}
