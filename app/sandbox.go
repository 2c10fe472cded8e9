package app

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/report"
	"github.com/purser-dev/purser/sandbox"
	"github.com/purser-dev/purser/validate"
)

// ProjectSandbox is the project's sandbox: setting in force: what
// purser.yaml says, else sandbox.Default (on). A nil project is off: a
// caller without one (a test, a tool) has nothing to box by.
func ProjectSandbox(proj *config.Project) sandbox.Setting {
	if proj == nil {
		return sandbox.Setting{Mode: sandbox.ModeOff}
	}
	return proj.Sandbox.Resolved()
}

// SandboxSaid says where the project's mode comes from, for messages:
// "purser.yaml sandbox: on", or "by default: purser.yaml has no sandbox: key"
// (or "there is no purser.yaml").
func SandboxSaid(proj *config.Project) string {
	switch {
	case proj != nil && proj.Sandbox.Mode == "" && proj.File == "":
		return "by default: there is no purser.yaml"
	case proj != nil && proj.Sandbox.Mode == "":
		return "by default: purser.yaml has no sandbox: key"
	}
	return "purser.yaml sandbox: " + string(ProjectSandbox(proj).Mode)
}

// Validators is the validator runner of a project: boxed when its
// sandbox: is on, as it is by default (docs/sandbox.md), else as before.
func Validators(proj *config.Project) validate.Runner {
	s := ProjectSandbox(proj)
	if !s.On() {
		return validate.Runner{}
	}
	return validate.Runner{Sandbox: &validate.Sandbox{Homes: config.BoxHomes(proj.Dir),
		ReadOnly: s.ReadOnly, Env: s.Env, Limits: s.Limits(), Allow: s.Allow}}
}

// BackendSandbox is the sandbox: setting in force for a backend, and
// whether its type can be boxed at all (the exec backend and the agent CLIs).
// A backend that cannot be boxed (sim, openai) runs in-process: the loader
// refuses its own sandbox: on.
func BackendSandbox(spec purser.BackendSpec) (backend.SandboxConfig, bool) {
	if b, ok := spec.Options.(backend.Boxable); ok {
		return b.Sandbox(), true
	}
	return backend.SandboxConfig{}, false
}

// Boxed names what would run in a box for these tasks: "validators" when
// the project's sandbox is on and a task has validators, "backend NAME" for
// each task backend whose sandbox is on.
func Boxed(proj *config.Project, tasks []purser.Task) []string {
	var on []string
	if ProjectSandbox(proj).On() && slices.ContainsFunc(tasks, func(t purser.Task) bool { return len(t.Validators) > 0 }) {
		on = append(on, "validators ("+SandboxSaid(proj)+")")
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

// RefuseUnboxed refuses to run tasks whose agent or validators would be
// boxed (the sandbox on, said or by default) where no box can be made,
// saying why and what to do: fail closed, never run unboxed unless the user
// wrote sandbox: off.
func RefuseUnboxed(proj *config.Project, tasks []purser.Task) error {
	on := Boxed(proj, tasks)
	if len(on) == 0 {
		return nil
	}
	if err := sandbox.Available(); err != nil {
		file := "purser.yaml"
		if proj != nil && proj.File != "" {
			file = proj.File
		}
		return BadInput(fmt.Errorf("%w (for %s): %w; nothing was run (to run unboxed, knowingly: sandbox: off in %s, or on the backend)", ErrNoBox, strings.Join(on, ", "), err, file))
	}
	return nil
}

// unboxed is what running unboxed means, in STATUS.md's and BUDGET.md's line.
const unboxed = "as you, with your environment, files, processes and network"

// SandboxLine is STATUS.md's and BUDGET.md's line on a task's box: whether
// its agent (its backend's sandbox:) and its validators (the project's) ran
// in one.
func SandboxLine(proj *config.Project, t purser.Task) string {
	c, boxable := BackendSandbox(t.Backend)
	agent, validators := c.On(), ProjectSandbox(proj).On()
	agentOff := "it ran " + unboxed
	if !boxable {
		agentOff = "type " + t.Backend.Type + " is not boxable: it ran in Purser's process, " + unboxed
	}
	switch {
	case agent && validators:
		return "sandbox: on (the agent and the validators ran in a box: their workspace, their own HOME, the allow-listed environment, no network)"
	case agent:
		return "sandbox: on for the agent (in a box, no network), off for the validators (they ran " + unboxed + ")"
	case validators:
		return "sandbox: off for the agent (" + agentOff + "), on for the validators (in a box, no network)"
	}
	return report.SandboxOff
}

// RunSandboxLine is the live view's one line on a run's box: which of the
// agents and the validators run in one, and which run unboxed and why
// (sandbox: off, or a backend that runs inside Purser).
func RunSandboxLine(proj *config.Project, tasks []purser.Task) string {
	var boxed, off, inProcess []string
	seen := map[string]bool{}
	for _, t := range tasks {
		if seen[t.Backend.Name] {
			continue
		}
		seen[t.Backend.Name] = true
		switch c, boxable := BackendSandbox(t.Backend); {
		case c.On():
			boxed = append(boxed, t.Backend.Name)
		case boxable:
			off = append(off, t.Backend.Name)
		default:
			inProcess = append(inProcess, t.Backend.Name+" ("+t.Backend.Type+")")
		}
	}
	validators := ProjectSandbox(proj).On()
	if !validators && len(boxed) == 0 {
		return "sandbox: off (" + sandboxOffWhy(proj, off, inProcess) + "; agents and validators run unboxed, " + unboxed + ")"
	}
	var parts []string
	if len(boxed) > 0 {
		parts = append(parts, "agent "+strings.Join(boxed, ", ")+" boxed")
	}
	if validators {
		parts = append(parts, "validators boxed")
	} else {
		parts = append(parts, "validators unboxed ("+SandboxSaid(proj)+")")
	}
	if len(off) > 0 {
		parts = append(parts, "agent "+strings.Join(off, ", ")+" unboxed (sandbox: off)")
	}
	if len(inProcess) > 0 {
		parts = append(parts, "agent "+strings.Join(inProcess, ", ")+" unboxed: runs inside Purser, not boxable")
	}
	return "sandbox: on (" + strings.Join(parts, "; ") + ")"
}

// sandboxOffWhy says why nothing of a run is boxed.
func sandboxOffWhy(proj *config.Project, off, inProcess []string) string {
	why := SandboxSaid(proj)
	if len(off) == 0 && len(inProcess) > 0 {
		why += "; " + strings.Join(inProcess, ", ") + " runs inside Purser, not boxable"
	}
	return why
}
