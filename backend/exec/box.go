package exec

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/sandbox"
)

var _ backend.Boxable = (*Options)(nil)

// checkBoxEnv refuses, in a box, an env: option the box never lets in
// (Purser's settings, database credentials, webhook URLs): said by name
// before a run rather than dropped silently.
func (o Options) checkBoxEnv() error {
	if !o.Sandbox().On() {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(o.Env)) {
		if sandbox.Forbidden(k) {
			return &backend.OptionError{Option: "env." + k, Msg: "never enters the agent's box (sandbox: on): PURSER_*, PG*, DATABASE_URL and webhook URLs stay outside"}
		}
	}
	return nil
}

// boxed is how one call runs: directly (box nil) or in a box.
type boxed struct {
	box *sandbox.Box
}

// boxFor describes the box of a call when the backend's sandbox is on: the
// workspace read-write, the task's own HOME (under Purser's state directory
// for the project, kept between calls for resume), the setting's read-only
// paths, the allow-listed environment, and no network (no door: the
// gateway, Purser's door, is the next step of issue 20).
func (b *Backend) boxFor(req purser.CallRequest) (boxed, error) {
	if !b.box.On() {
		return boxed{}, nil
	}
	if b.box.Homes == "" || req.TaskID == "" {
		return boxed{}, errors.New("exec: sandbox is on but no HOME can be made for the box (a backend built without the config loader, or a call without a task)")
	}
	home := filepath.Join(b.box.Homes, "agent-"+req.TaskID)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return boxed{}, fmt.Errorf("exec: making the box's HOME: %w", err)
	}
	env := sandbox.EnvAllowList(os.Environ(), b.box.Env...)
	maps.Copy(env, b.env)
	return boxed{box: &sandbox.Box{Workspace: req.Workspace, Home: home, ReadOnly: readOnly(b.argv[0], req.Workspace, b.box.ReadOnly), Env: env, Limits: b.box.Limits(), Allow: b.box.Allow}}, nil
}

// callRoot is where a call's prompt and usage files are made: in the
// box's HOME when boxed (the one place outside the workspace the box writes),
// else the system's temporary directory.
func (c boxed) callRoot() string {
	if c.box == nil {
		return ""
	}
	return c.box.Home
}

// command returns the program, arguments and environment that run the
// agent, with call (the protocol's variables) added to its environment.
func (c boxed) command(ctx context.Context, b *Backend, workspace string, call map[string]string) (string, []string, []string, error) {
	if c.box == nil {
		env := os.Environ()
		for k, v := range b.env {
			env = append(env, k+"="+v)
		}
		for _, k := range slices.Sorted(maps.Keys(call)) {
			env = append(env, k+"="+call[k])
		}
		return b.argv[0], b.argv[1:], env, nil
	}
	box := *c.box
	box.Env = maps.Clone(box.Env)
	maps.Copy(box.Env, call)
	cmd, err := box.Command(ctx, b.argv[0], b.argv[1:]...)
	if err != nil {
		return "", nil, nil, err
	}
	return cmd.Path, cmd.Args[1:], cmd.Env, nil
}

// readOnly is the box's read-only paths: the setting's, and the agent's
// program file when the box would not see it otherwise (outside the system
// directories and the workspace). Only the file: its directory may hold the
// workspace or the project's files; what else it needs is named in readOnly.
func readOnly(program, workspace string, extra []string) []string {
	out := slices.Clone(extra)
	ws := filepath.Clean(workspace) + "/"
	if filepath.IsAbs(program) && !underSystem(program) && !strings.HasPrefix(program, ws) && !slices.Contains(out, program) {
		out = append(out, filepath.Clean(program))
	}
	return out
}

// underSystem reports whether path is in a directory every box sees.
func underSystem(path string) bool {
	for _, d := range []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/"} {
		if strings.HasPrefix(path, d) {
			return true
		}
	}
	return false
}

// EnvNames are the names the env: option sets, for purser check to list
// among what enters the box.
func (o *Options) EnvNames() []string { return slices.Sorted(maps.Keys(o.Env)) }
