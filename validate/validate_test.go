package validate_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/internal/proctest"
	"github.com/purser-dev/purser/validate"
)

func TestValidatorPassAndFail(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { testValidatorPassAndFail(t, m.runner(t)) })
	}
}

func testValidatorPassAndFail(t *testing.T, r validate.Runner) {
	ws := t.TempDir()
	pass := r.RunValidator(context.Background(), ws, purser.Validator{Name: "ok", Run: "pwd; echo fine"})
	if !pass.Passed || pass.ExitCode != 0 || !strings.Contains(pass.Output, ws) {
		t.Fatalf("pass = %+v (it must run in the workspace)", pass)
	}
	fail := r.RunValidator(context.Background(), ws, purser.Validator{Name: "bad", Run: "echo broken >&2; exit 7"})
	if fail.Passed || fail.ExitCode != 7 || !strings.Contains(fail.Output, "broken") {
		t.Fatalf("fail = %+v", fail)
	}
}

// A validator that times out is killed with its whole process group, the
// grandchildren it started included.
func TestValidatorTimeoutKillsProcessGroup(t *testing.T) {
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) { testValidatorTimeoutKillsProcessGroup(t, m, 6100+i) })
	}
}

func testValidatorTimeoutKillsProcessGroup(t *testing.T, m mode, secs int) {
	r := m.runner(t)
	ws := t.TempDir()
	start := time.Now()
	// The timeout leaves the shell room to write child.pid on a slow machine.
	res := r.RunValidator(context.Background(), ws, purser.Validator{
		Name: "hang", Run: fmt.Sprintf("sleep %d & echo $! > child.pid; trap '' TERM; wait", secs), Timeout: 2 * time.Second})
	if res.Passed || !res.TimedOut || !strings.Contains(res.Output, "timed out") {
		t.Fatalf("res = %+v", res)
	}
	if took := time.Since(start); took > validate.KillGrace+30*time.Second {
		t.Fatalf("took %s to give up", took)
	}
	if !m.boxed { // a pid in a box means nothing outside it
		proctest.RequireGone(t, ws, "child.pid", 2*time.Second)
	}
	requireNoProcess(t, strconv.Itoa(secs), 2*time.Second)
}

// A validator that passes but leaves a process behind — even one that left
// its process group with setsid — does not leave it running.
func TestValidatorLeftoversEndWithIt(t *testing.T) {
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) { testValidatorLeftoversEndWithIt(t, m, 6200+2*i) })
	}
}

func testValidatorLeftoversEndWithIt(t *testing.T, m mode, secs int) {
	r := m.runner(t)
	ws := t.TempDir()
	res := r.RunValidator(context.Background(), ws, purser.Validator{
		Name: "leaves", Run: fmt.Sprintf("sleep %d >/dev/null 2>&1 & echo $! > stray.pid; setsid sleep %d >/dev/null 2>&1 & echo $! > escaped.pid; sleep 0.2; echo done", secs, secs+1)})
	if !res.Passed {
		t.Fatalf("res = %+v", res)
	}
	if !m.boxed { // a pid in a box means nothing outside it
		for _, f := range []string{"stray.pid", "escaped.pid"} {
			proctest.RequireGone(t, ws, f, 10*time.Second) // a SIGKILLed process takes a moment to go
		}
	}
	for _, s := range []int{secs, secs + 1} {
		requireNoProcess(t, strconv.Itoa(s), 10*time.Second)
	}
}

func TestValidatorOutputTrimmedFromTheMiddle(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { testValidatorOutputTrimmedFromTheMiddle(t, m.runner(t)) })
	}
}

func testValidatorOutputTrimmedFromTheMiddle(t *testing.T, r validate.Runner) {
	res := r.RunValidator(context.Background(), t.TempDir(), purser.Validator{
		Name: "noisy", Run: "echo FIRST; yes noise | head -c 1000000; echo; echo LAST; exit 1"})
	if len(res.Output) > validate.MaxOutput+200 || !strings.HasPrefix(res.Output, "FIRST") || !strings.Contains(res.Output, "LAST") || !strings.Contains(res.Output, "bytes cut from the middle") {
		t.Fatalf("output of %d bytes: %q … %q", len(res.Output), res.Output[:40], res.Output[len(res.Output)-40:])
	}
}
