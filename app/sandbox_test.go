package app_test

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/backend"
	pexec "github.com/purser-dev/purser/backend/exec"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/report"
	"github.com/purser-dev/purser/sandbox"
)

func TestSandboxLineAndValidators(t *testing.T) {
	on := sandbox.Setting{Mode: sandbox.ModeOn}
	boxedOpts := pexec.NewOptions().(*pexec.Options)
	boxedOpts.SetSandbox(backend.SandboxConfig{Setting: on, Homes: "/state/boxes"})
	boxed := purser.Task{ID: "t", Backend: purser.BackendSpec{Name: "agent", Type: "exec", Options: boxedOpts}}
	plain := purser.Task{ID: "u", Backend: purser.BackendSpec{Name: "claude", Type: "claude"}}
	projOn := &config.Project{Dir: "/p", Sandbox: on}
	projOff := &config.Project{Dir: "/p", Sandbox: sandbox.Setting{Mode: sandbox.ModeOff}}
	projDefault := &config.Project{Dir: "/p"} // purser.yaml without sandbox:
	offOpts := pexec.NewOptions().(*pexec.Options)
	offOpts.SetSandbox(backend.SandboxConfig{Setting: sandbox.Setting{Mode: sandbox.ModeOff}})
	unboxedExec := purser.Task{ID: "v", Backend: purser.BackendSpec{Name: "agent", Type: "exec", Options: offOpts}}

	for _, c := range []struct {
		proj *config.Project
		task purser.Task
		want string
	}{
		{projOff, plain, report.SandboxOff},
		{projOn, boxed, "sandbox: on (the agent and the validators ran in a box"},
		{projOff, boxed, "sandbox: on for the agent (in a box, no network), off for the validators"},
		{projOn, plain, "sandbox: off for the agent (type claude is not boxable: it ran in Purser's process, as you"},
		{projOn, unboxedExec, "sandbox: off for the agent (it ran as you"},
		{projDefault, boxed, "sandbox: on (the agent and the validators ran in a box"},
		{projDefault, plain, "sandbox: off for the agent (type claude is not boxable"},
	} {
		if got := app.SandboxLine(c.proj, c.task); !strings.HasPrefix(got, c.want) {
			t.Errorf("SandboxLine = %q, want %q…", got, c.want)
		}
	}
	if r := app.Validators(projOff); r.Sandbox != nil {
		t.Error("validators boxed with sandbox off")
	}
	r := app.Validators(projOn)
	if r.Sandbox == nil || r.Sandbox.Homes != config.BoxHomes("/p") {
		t.Errorf("validators with sandbox on: %+v", r.Sandbox)
	}
	if r := app.Validators(projDefault); r.Sandbox == nil {
		t.Error("validators unboxed by default: purser.yaml without sandbox: means on")
	}
	validated := plain
	validated.Validators = []purser.Validator{{Name: "test"}}
	if got := app.Boxed(projOn, []purser.Task{validated}); len(got) != 1 || !strings.Contains(got[0], "purser.yaml sandbox: on") {
		t.Errorf("Boxed = %v", got)
	}
	if got := app.Boxed(projDefault, []purser.Task{validated}); len(got) != 1 || !strings.Contains(got[0], "by default") {
		t.Errorf("Boxed by default = %v, want the validators, said to be on by default", got)
	}
	if got := app.Boxed(projOn, []purser.Task{plain}); len(got) != 0 {
		t.Errorf("Boxed = %v: a task without validators on an unboxable backend runs nothing in a box", got)
	}
	if err := app.RefuseUnboxed(projOn, nil); err != nil {
		t.Errorf("nothing to run, nothing refused: %v", err)
	}
	if err := app.RefuseUnboxed(projOff, []purser.Task{plain}); err != nil {
		t.Errorf("off: %v", err)
	}
}

// The live view's line says which of a run's agents and validators are
// boxed, and why the rest are not.
func TestRunSandboxLine(t *testing.T) {
	on := sandbox.Setting{Mode: sandbox.ModeOn}
	off := sandbox.Setting{Mode: sandbox.ModeOff}
	exec := func(name string, s sandbox.Setting) purser.Task {
		o := pexec.NewOptions().(*pexec.Options)
		o.SetSandbox(backend.SandboxConfig{Setting: s, Homes: "/state/boxes"})
		return purser.Task{ID: name, Backend: purser.BackendSpec{Name: name, Type: "exec", Options: o}}
	}
	sim := purser.Task{ID: "s", Backend: purser.BackendSpec{Name: "sim", Type: "sim"}}
	for _, c := range []struct {
		proj  *config.Project
		tasks []purser.Task
		want  string
	}{
		{&config.Project{}, []purser.Task{exec("a", on)}, "sandbox: on (agent a boxed; validators boxed)"},
		{&config.Project{}, []purser.Task{sim}, "sandbox: on (validators boxed; agent sim (sim) unboxed: runs inside Purser, not boxable)"},
		{&config.Project{Sandbox: on}, []purser.Task{exec("a", on), exec("b", off)}, "sandbox: on (agent a boxed; validators boxed; agent b unboxed (sandbox: off))"},
		{&config.Project{Sandbox: off}, []purser.Task{exec("a", on)}, "sandbox: on (agent a boxed; validators unboxed (purser.yaml sandbox: off))"},
		{&config.Project{Sandbox: off}, []purser.Task{exec("a", off)}, "sandbox: off (purser.yaml sandbox: off; agents and validators run unboxed, as you"},
		{&config.Project{Sandbox: off}, []purser.Task{sim}, "sandbox: off (purser.yaml sandbox: off; sim (sim) runs inside Purser, not boxable; agents and validators run unboxed"},
	} {
		if got := app.RunSandboxLine(c.proj, c.tasks); !strings.HasPrefix(got, c.want) {
			t.Errorf("RunSandboxLine = %q, want %q…", got, c.want)
		}
	}
}
