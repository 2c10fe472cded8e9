package app

import (
	"errors"
	"fmt"
	"strings"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/report"
	"github.com/purser-dev/purser/sandbox"
	"github.com/purser-dev/purser/validate"
)

// Validators is the validator runner of a project: boxed when its
// sandbox: is on (docs/sandbox.md), else as before.
func Validators(proj *config.Project) validate.Runner {
	if proj == nil || !proj.Sandbox.On() {
		return validate.Runner{}
	}
	return validate.Runner{Sandbox: &validate.Sandbox{Homes: config.BoxHomes(proj.Dir),
		ReadOnly: proj.Sandbox.ReadOnly, Env: proj.Sandbox.Env, Limits: proj.Sandbox.Limits(), Allow: proj.Sandbox.Allow}}
}

// BackendSandbox is the sandbox: setting in force for a backend, and
// whether its type can be boxed at all (the exec backend and the agent CLIs).
// A backend that cannot be boxed is off: the loader refuses on for it.
func BackendSandbox(spec purser.BackendSpec) (backend.SandboxConfig, bool) {
	if b, ok := spec.Options.(backend.Boxable); ok {
		return b.Sandbox(), true
	}
	return backend.SandboxConfig{}, false
}

// Boxed names what runs in a box for these tasks: "validators" when the
// project's sandbox is on, "backend NAME" for each task backend whose
// sandbox is on.
func Boxed(proj *config.Project, tasks []purser.Task) []string {
	var on []string
	if proj != nil && proj.Sandbox.On() {
		on = append(on, "validators (purser.yaml sandbox: on)")
	}
	seen := map[string]bool{}
	for _, t := range tasks {
		if c, _ := BackendSandbox(t.Backend); c.On() && !seen[t.Backend.Name] {
			seen[t.Backend.Name] = true
			on = append(on, "backend "+t.Backend.Name)
		}
	}
	return on
}

// ErrNoBox is why a run that asked for a box was refused: none can be made
// here.
var ErrNoBox = errors.New("sandbox is on but no box can be made here")

// RefuseUnboxed refuses to run tasks that asked for a box where none can be
// made, saying why and what to do: fail closed, never run unboxed against
// the user's word.
func RefuseUnboxed(proj *config.Project, tasks []purser.Task) error {
	on := Boxed(proj, tasks)
	if len(on) == 0 || len(tasks) == 0 {
		return nil
	}
	if err := sandbox.Available(); err != nil {
		return BadInput(fmt.Errorf("%w (for %s): %w; nothing was run", ErrNoBox, strings.Join(on, ", "), err))
	}
	return nil
}

// SandboxLine is STATUS.md's and BUDGET.md's line on a task's box: whether
// its agent (its backend's sandbox:) and its validators (the project's) ran
// in one.
func SandboxLine(proj *config.Project, t purser.Task) string {
	c, _ := BackendSandbox(t.Backend)
	agent, validators := c.On(), proj != nil && proj.Sandbox.On()
	const unboxed = "as you, with your environment, files, processes and network"
	switch {
	case agent && validators:
		return "sandbox: on (the agent and the validators ran in a box: their workspace, their own HOME, the allow-listed environment, no network)"
	case agent:
		return "sandbox: on for the agent (in a box, no network), off for the validators (they ran " + unboxed + ")"
	case validators:
		return "sandbox: off for the agent (it ran " + unboxed + "), on for the validators (in a box, no network)"
	}
	return report.SandboxOff
}
