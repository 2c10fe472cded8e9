package exec_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	pexec "github.com/purser-dev/purser/backend/exec"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/internal/proctest"
	"github.com/purser-dev/purser/sandbox"
)

func requireBox(t *testing.T) {
	t.Helper()
	if err := sandbox.Available(); err != nil {
		if os.Getenv("PURSER_TEST_SANDBOX") == "required" {
			t.Fatalf("PURSER_TEST_SANDBOX=required: %v", err)
		}
		t.Skip(err)
	}
}

// boxedAgent is an exec backend running script in a box, with homes as
// the directory of its HOMEs.
func boxedAgent(t *testing.T, script string, env map[string]string) (b *pexec.Backend, ws, homes string) {
	t.Helper()
	dir := t.TempDir()
	prog := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	homes = filepath.Join(dir, "state", "boxes")
	opts := pexec.NewOptions().(*pexec.Options)
	opts.Command, opts.Env = []string{prog}, env
	opts.SetSandbox(backend.SandboxConfig{Setting: sandbox.Setting{Mode: sandbox.ModeOn}, Homes: homes})
	b, err := pexec.New(purser.BackendSpec{Type: "exec", Dir: dir, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	ws = filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return b, ws, homes
}

// In a box the exec protocol works as before: the prompt on stdin and in
// its file, the usage file read as it grows, the output kept; the HOME is
// the task's own, kept, and Purser's settings never enter.
func TestBoxedExecKeepsTheProtocol(t *testing.T) {
	requireBox(t)
	t.Setenv("PGPASSWORD", "pg-secret")
	b, ws, homes := boxedAgent(t, `cat "$PURSER_PROMPT_FILE"; read line; echo "stdin=$line"
echo "home=$HOME pg=${PGPASSWORD:-none} own=$OWN"
echo '{"inputTokens": 7, "outputTokens": 3, "costUsd": 0.25}' >> "$PURSER_USAGE_FILE"
echo kept > "$HOME/mark"; echo work > work.txt`, map[string]string{"OWN": "given"})
	var c collector
	res, err := b.Call(context.Background(), purser.CallRequest{TaskID: "t1", Workspace: ws, Prompt: "the prompt\n", Model: "m"}, c.report)
	if err != nil {
		t.Fatalf("call: %v\n%s", err, res.Text)
	}
	home := filepath.Join(homes, "agent-t1")
	for _, want := range []string{"the prompt", "stdin=the prompt", "home=" + home, "pg=none", "own=given"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("output lacks %q:\n%s", want, res.Text)
		}
	}
	if len(c.evs) != 1 || c.evs[0].InputTokens != 7 || c.evs[0].CostSource != budget.CostReported {
		t.Fatalf("usage = %+v", c.evs)
	}
	for _, f := range []string{filepath.Join(home, "mark"), filepath.Join(ws, "work.txt")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	leftover, _ := filepath.Glob(filepath.Join(home, "purser-exec-*"))
	if len(leftover) != 0 {
		t.Errorf("the call's files were left in the HOME: %v", leftover)
	}
}

// A boxed agent's exit 75 is still a retry, anything else a failure.
func TestBoxedExecExitCodes(t *testing.T) {
	requireBox(t)
	b, ws, _ := boxedAgent(t, `echo "429 too many requests" >&2; exit 75`, nil)
	_, err := b.Call(context.Background(), purser.CallRequest{TaskID: "t2", Workspace: ws}, func(budget.UsageEvent) {})
	var fe *proc.FaultError
	if !errors.As(err, &fe) || !fe.Fault.Transient() {
		t.Fatalf("err = %v, want a transient fault", err)
	}
	b, ws, _ = boxedAgent(t, `exit 3`, nil)
	if _, err := b.Call(context.Background(), purser.CallRequest{TaskID: "t3", Workspace: ws}, func(budget.UsageEvent) {}); err == nil || errors.As(err, &fe) {
		t.Fatalf("err = %v, want a failure", err)
	}
}

// An env: option naming one of Purser's settings is refused by name when
// the box is on.
func TestBoxedExecRefusesForbiddenEnv(t *testing.T) {
	opts := pexec.NewOptions().(*pexec.Options)
	opts.Command, opts.Env = []string{"/bin/true"}, map[string]string{"PGPASSWORD": "x"}
	if err := opts.Check(""); err != nil {
		t.Fatalf("off: %v", err)
	}
	opts.SetSandbox(backend.SandboxConfig{Setting: sandbox.Setting{Mode: sandbox.ModeOn}})
	if err := opts.Check(""); err == nil || !strings.Contains(err.Error(), "env.PGPASSWORD") {
		t.Fatalf("on: %v", err)
	}
}

// Cancelling a boxed call ends the whole box: the agent and what it
// started in the background, setsid included.
func TestBoxedExecCancelKillsTheBox(t *testing.T) {
	requireBox(t)
	args := []string{proctest.UniqueArg(), proctest.UniqueArg(), proctest.UniqueArg()}
	b, ws, _ := boxedAgent(t, fmt.Sprintf(`sleep %s & setsid sleep %s & echo started; sleep %s`, args[0], args[1], args[2]), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.Call(ctx, purser.CallRequest{TaskID: "t4", Workspace: ws}, func(budget.UsageEvent) {})
		done <- err
	}()
	for end := time.Now().Add(5 * time.Second); proctest.FindProcess(args[2]) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the boxed agent never started")
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	for _, arg := range args {
		for end := time.Now().Add(5 * time.Second); proctest.FindProcess(arg) != 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("sleep %s still runs after the box was cancelled", arg)
			}
		}
	}
}
