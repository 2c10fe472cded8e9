package proc_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/sandbox"
)

// requireBox skips where no box can be made, unless PURSER_TEST_SANDBOX is
// required (CI), where it fails.
func requireBox(t *testing.T) {
	t.Helper()
	if err := sandbox.Available(); err != nil {
		if os.Getenv("PURSER_TEST_SANDBOX") == "required" {
			t.Fatalf("PURSER_TEST_SANDBOX=required: %v", err)
		}
		t.Skip(err)
	}
}

// boxedCall runs script as a boxed CLI (sh -c) for one call, stopped by
// cancelling its context once it printed "started"; it returns the lines
// it printed and the workspace.
func boxedCall(t *testing.T, setting sandbox.Setting, script string, grace time.Duration, stopAfterStart bool) (lines []string, ws, stderr string) {
	t.Helper()
	requireBox(t)
	dir := t.TempDir()
	ws = filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	setting.Mode = sandbox.ModeOn
	o := proc.CLIOptions{Command: "/bin/sh"}
	o.SetSandbox(backend.SandboxConfig{Setting: setting, Homes: filepath.Join(dir, "boxes")})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var mu sync.Mutex
	req := purser.CallRequest{TaskID: "t", Workspace: ws, Hooks: purser.CallHooks{}}
	_, _ = o.Call(ctx, req, func(budget.UsageEvent) {}, proc.CLICall{
		Backend: "fake",
		Command: func(*proc.WireMeter) (proc.Command, string) {
			return proc.Command{Args: []string{"-c", script}, Grace: grace}, ""
		},
		Feed: func(line []byte) ([]budget.UsageEvent, error) {
			mu.Lock()
			lines = append(lines, string(line))
			mu.Unlock()
			if string(line) == "started" && stopAfterStart {
				cancel(context.Canceled)
			}
			return nil, nil
		},
		Finish: func(out proc.Outcome, _ error, _ int, _ purser.UsageFunc, _ *purser.CallResult) error {
			stderr = out.Stderr
			return nil
		},
	})
	mu.Lock()
	defer mu.Unlock()
	return lines, ws, stderr
}

// processesIn lists the processes working in dir (a boxed process's cwd is
// its workspace, at the same path).
func processesIn(dir string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == dir {
			stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if i := strings.LastIndexByte(string(stat), ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
				continue
			}
			out = append(out, e.Name())
		}
	}
	return out
}

// The graceful stop reaches the boxed CLI itself (through the box's init:
// bwrap forwards no signal), so that it still reports what it spent.
func TestBoxedStopIsGraceful(t *testing.T) {
	lines, ws, _ := boxedCall(t, sandbox.Setting{}, `trap 'echo interrupted; exit 0' INT; echo started; while :; do sleep 0.05; done`, 10*time.Second, true)
	if !slicesContains(lines, "interrupted") {
		t.Fatalf("the boxed CLI never saw the graceful stop: %q", lines)
	}
	if left := processesIn(ws); len(left) > 0 {
		t.Fatalf("processes left in the workspace: %v", left)
	}
}

// The hard stop after the grace kills the whole box: the CLI that ignores
// the graceful signal, its children, and the ones that left its group and
// session (setsid), all gone when the call returns.
func TestBoxedHardStopKillsTheBox(t *testing.T) {
	start := time.Now()
	lines, ws, _ := boxedCall(t, sandbox.Setting{}, `trap '' INT; setsid sleep 1000 & (sleep 1000 &) ; sleep 1000 & echo started; while :; do sleep 0.05; done`, 300*time.Millisecond, true)
	if !slicesContains(lines, "started") {
		t.Fatalf("the boxed CLI did not start: %q", lines)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the hard stop took %s", took)
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(processesIn(ws)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if left := processesIn(ws); len(left) > 0 {
		t.Fatalf("processes of the box left after the hard stop: %v", left)
	}
}

// processes: in the sandbox setting bounds a boxed CLI. For a user other
// than root the kernel refuses the fork past the bound, so the loop never
// gets to 200. Root is exempt from RLIMIT_NPROC, so there the box's init
// counts and ends the box: the loop may get further before the count sees
// it (docs/sandbox.md), but the box ends, saying why, and the sleeps go
// with it (without that the script's wait would hold the call for 1000 s).
func TestBoxedCLIProcessesAreBounded(t *testing.T) {
	lines, ws, stderr := boxedCall(t, sandbox.Setting{Processes: 24}, `i=0; while [ $i -lt 200 ]; do sleep 1000 2>/dev/null & i=$((i+1)); echo "n=$i"; done; echo "all 200"; wait`, time.Second, false)
	n := 0
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, "n="); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	t.Logf("uid %d: %d sleeps started under a bound of 24", os.Getuid(), n)
	if os.Getuid() == 0 {
		if !strings.Contains(stderr, "more than the box's limit of 24: the box is ended") {
			t.Fatalf("the box of a root Purser was not ended by its init for its processes; stderr:\n%s", stderr)
		}
	} else if slicesContains(lines, "all 200") || n >= 200 {
		t.Fatalf("200 sleeps started in a box bounded to 24 processes")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(processesIn(ws)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if left := processesIn(ws); len(left) > 0 {
		t.Fatalf("processes of the box left: %v", left)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
