package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/purser-dev/purser/backend"
)

// CLIOptions are the options every agent-CLI backend takes. A backend's
// options embed them with `yaml:",inline"`, so their keys are the backend's.
type CLIOptions struct {
	// Command is the executable: a name looked up on the PATH, or a path; a
	// relative path with a slash is resolved against the directory of the
	// file that configured the backend (see Resolved).
	Command string `yaml:"command"`
	// Env adds to Purser's environment: settings such as a base URL or HOME.
	// Secrets come from Purser's own environment, never from files.
	Env map[string]string `yaml:"env"`
	// WireMeter puts Purser's metering proxy between the CLI and its
	// provider (backend/meter), so that a reply the CLI dies holding is
	// still counted on resume. On unless set to false (a network set-up the
	// proxy cannot pass, such as a provider reached only through a
	// client-certificate gateway).
	WireMeter *bool `yaml:"wireMeter"`
	// KeyFile is a file whose first line is the provider key, held by
	// Purser's door (keys.go) in place of one from the environment; a
	// relative path is resolved as Command is. The CLI never reads it.
	KeyFile string `yaml:"keyFile"`

	// The sandbox: setting in force, given by the loader (box.go).
	backend.BoxSetting `yaml:"-"`
}

// Validate checks the options' values.
func (o CLIOptions) Validate() error {
	var errs []error
	if strings.TrimSpace(o.Command) == "" {
		errs = append(errs, &backend.OptionError{Option: "command", Msg: "must not be empty: the CLI to run, a name on the PATH or a path"})
	}
	for k := range o.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			errs = append(errs, &backend.OptionError{Option: "env", Msg: fmt.Sprintf("%q is not an environment variable name", k)})
		}
	}
	return errors.Join(errs...)
}

// Resolved returns the options with a relative command path resolved
// against dir.
func (o CLIOptions) Resolved(dir string) CLIOptions {
	if !filepath.IsAbs(o.Command) && strings.Contains(o.Command, "/") {
		o.Command = filepath.Join(dir, o.Command)
	}
	if o.KeyFile != "" && !filepath.IsAbs(o.KeyFile) {
		o.KeyFile = filepath.Join(dir, o.KeyFile)
	}
	return o
}

// Check finds the command, resolved against dir: on the PATH, or at its
// path as an executable file.
func (o CLIOptions) Check(dir string) error {
	if _, err := FindCommand(o.Resolved(dir).Command); err != nil {
		return &backend.OptionError{Option: "command", Msg: err.Error(), Err: err}
	}
	if o.KeyFile != "" {
		if fi, err := os.Stat(o.Resolved(dir).KeyFile); err != nil || !fi.Mode().IsRegular() {
			return &backend.OptionError{Option: "keyFile", Msg: "must name a regular file holding the provider key on its first line", Err: err}
		}
	}
	return nil
}

// FindCommand returns the executable a command names: a bare name is looked
// up on the PATH; a path must be an executable file.
func FindCommand(command string) (string, error) {
	if !strings.Contains(command, "/") {
		p, err := exec.LookPath(command)
		if err != nil {
			return "", fmt.Errorf("%q is not on the PATH (install it, or give its path)", command)
		}
		return p, nil
	}
	fi, err := os.Stat(command)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%s does not exist", command)
	case err != nil:
		return "", fmt.Errorf("%s: %w", command, err)
	case fi.IsDir():
		return "", fmt.Errorf("%s is a directory, not an executable file", command)
	case fi.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("%s is not executable (chmod +x it)", command)
	}
	return command, nil
}

// Environ is Purser's environment, then the options' additions, then extra
// (later entries win).
func (o CLIOptions) Environ(extra ...string) []string {
	env := os.Environ()
	for k, v := range o.Env {
		env = append(env, k+"="+v)
	}
	return append(env, extra...)
}

// Home is the HOME the CLI runs with.
func (o CLIOptions) Home() string {
	if h := o.Env["HOME"]; h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

// Incomplete describes a CLI that ended without its final line: how it
// exited, the first unreadable line, and the end of its stderr.
func (o Outcome) Incomplete(what string, parseErr error) string {
	msg := what
	if o.WaitErr != nil {
		msg += " (" + o.WaitErr.Error() + ")"
	}
	if parseErr != nil {
		msg += ": " + parseErr.Error()
	}
	if s := strings.TrimSpace(o.Stderr); s != "" {
		msg += ": " + LastLines(s, 5)
	}
	return msg
}
