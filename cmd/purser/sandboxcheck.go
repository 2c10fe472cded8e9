package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/sandbox"
)

// offMeaning is what sandbox: off means, said wherever it is in force.
const offMeaning = "runs as you, with your environment (secrets included), your files (the ledger, purser.yaml, ~/.ssh), your processes and the network"

// describeSandbox says, for the task's backend and for its validators,
// whether they run in a box and what the box lets through; and, where no
// purser.yaml says, that the box is on by default.
func describeSandbox(w io.Writer, t purser.Task, proj *config.Project) {
	switch {
	case proj != nil && proj.Sandbox.Mode == "" && proj.File == "":
		fmt.Fprintf(w, "  sandbox     on by default (there is no purser.yaml; one in %s saying sandbox: off runs unboxed, knowingly)\n", proj.Dir)
	case proj != nil && proj.Sandbox.Mode == "":
		fmt.Fprintf(w, "  sandbox     on by default (%s has no sandbox: key; write sandbox: off there to run unboxed, knowingly)\n", proj.File)
	}
	c, boxable := app.BackendSandbox(t.Backend)
	switch {
	case c.On():
		fmt.Fprintf(w, "  sandbox     backend %s: on: %s\n", t.Backend.Name, backendBox(t, c))
	case boxable:
		fmt.Fprintf(w, "  sandbox     backend %s: off: the agent %s\n", t.Backend.Name, offMeaning)
	default:
		fmt.Fprintf(w, "  sandbox     backend %s: in-process: type %s is not boxable (it calls its model from inside Purser, which applies its edits to the workspace: there is no agent process to box)\n", t.Backend.Name, t.Backend.Type)
	}
	if s := app.ProjectSandbox(proj); s.On() {
		v := backend.SandboxConfig{Setting: s, Homes: config.BoxHomes(proj.Dir)}
		fmt.Fprintf(w, "  sandbox     validators: on: %s\n", boxAllows(v, filepath.Join(v.Homes, "validators-…"), nil))
	} else {
		fmt.Fprintf(w, "  sandbox     validators: off: each validator %s\n", offMeaning)
	}
}

// backendBox says what a boxed backend's box lets through.
func backendBox(t purser.Task, c backend.SandboxConfig) string {
	var env map[string]string
	if o, ok := t.Backend.Options.(interface{ EnvNames() []string }); ok {
		env = map[string]string{}
		for _, n := range o.EnvNames() {
			env[n] = ""
		}
	}
	line := boxAllows(c, filepath.Join(c.Homes, "agent-"+t.ID), env)
	if o, ok := t.Backend.Options.(interface{ BoxNetwork() string }); ok {
		line = strings.Replace(line, noDoor, o.BoxNetwork(), 1)
	}
	if t.Backend.Type == "codex" {
		line += "; Codex's own sandbox is off inside the box (bubblewrap cannot nest; the box is the boundary)"
	}
	return line
}

// noDoor is the network of a box without a door.
const noDoor = "none (no door)"

// boxAllows says what a box lets through: files, environment names,
// network.
func boxAllows(c backend.SandboxConfig, home string, own map[string]string) string {
	files := []string{"the workspace read-write", "its own HOME " + home + " read-write", "/usr, /bin, /lib* and a few /etc files read-only"}
	for _, p := range c.ReadOnly {
		files = append(files, p+" read-only")
	}
	files = append(files, "a private /tmp")
	names := sandbox.AllowedNames()
	names = append(names, c.Env...)
	for n := range own {
		names = append(names, n)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	line := fmt.Sprintf("files: %s; env: %s (values from your environment or the backend's env:, nothing else); network: "+noDoor,
		strings.Join(files, ", "), strings.Join(names, ", "))
	if len(c.Allow) > 0 {
		line += "; and through Purser's egress proxy (HTTPS_PROXY, every connection logged) " + strings.Join(c.Allow, ", ") + " only"
	}
	return line
}
