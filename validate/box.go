package validate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/purser-dev/purser/internal/procgroup"
	"github.com/purser-dev/purser/sandbox"
)

// Sandbox is how validators are boxed: a validator runs the repository's
// code, so it gets what an agent gets — its workspace read-write, a HOME of
// its own, the system read-only, a private /tmp, the allow-listed
// environment — and no network at all (no door).
type Sandbox struct {
	// Homes is the directory (in Purser's state directory for the project,
	// outside every workspace) under which each workspace's validators get
	// their HOME, kept between runs.
	Homes string
	// ReadOnly are more host paths the box sees read-only.
	ReadOnly []string
	// Env are more variable names passed in beside the allow-list.
	Env []string
	// Limits bound each validator's box (zero fields: the defaults).
	Limits sandbox.Limits
	// Allow are the destinations the box reaches through Purser's egress
	// proxy (sandbox.network.allow; see sandbox.Box.Allow).
	Allow []string
}

// command is sh -c run, directly or in the box. A boxed one comes with
// the write end of the box's lifeline (sandbox.Box.Lifeline), which the
// caller closes once the validator has ended; nil unboxed.
func (r Runner) command(workspace, run string) (*exec.Cmd, *os.File, error) {
	if r.Sandbox == nil {
		return exec.Command("sh", "-c", run), nil, nil
	}
	home, err := r.Sandbox.home(workspace)
	if err != nil {
		return nil, nil, err
	}
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: the box's lifeline: %w", err)
	}
	box := sandbox.Box{Workspace: workspace, Home: home, ReadOnly: r.Sandbox.ReadOnly,
		Env: sandbox.EnvAllowList(os.Environ(), r.Sandbox.Env...), Limits: r.Sandbox.Limits, Allow: r.Sandbox.Allow,
		Lifeline: lifeR}
	// Not bound to a context: the timeout and the kill are RunValidator's,
	// through the process group, as for an unboxed validator.
	cmd, err := box.Command(context.Background(), "sh", "-c", run)
	if err != nil {
		lifeR.Close()
		lifeW.Close()
		return nil, nil, err
	}
	return cmd, lifeW, nil
}

// start starts the validator's command. A boxed one is the box's own
// (procgroup.StartContained): the box's pid namespace holds whatever the
// validator starts and dies with Purser, which is all a supervisor would
// add; and only this process holds the write end of the box's lifeline,
// so that should it die at any moment, the box's init ends the box. An
// unboxed one runs as Purser runs every other child.
func (r Runner) start(cmd *exec.Cmd) (*procgroup.Group, error) {
	if r.Sandbox == nil {
		return procgroup.Start(cmd)
	}
	g, err := procgroup.StartContained(cmd)
	for _, f := range cmd.ExtraFiles {
		f.Close() // the lifeline's read end: bwrap holds it now
	}
	return g, err
}

// home makes the validators' HOME of a workspace: one per workspace (a
// task's), named by its path.
func (s *Sandbox) home(workspace string) (string, error) {
	if s.Homes == "" {
		return "", fmt.Errorf("sandbox: no directory for the validators' HOME")
	}
	sum := sha256.Sum256([]byte(filepath.Clean(workspace)))
	home := filepath.Join(s.Homes, "validators-"+filepath.Base(workspace)+"-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", fmt.Errorf("sandbox: making the validators' HOME: %w", err)
	}
	return home, nil
}
