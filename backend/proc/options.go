package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/purser-dev/purser"
)

// CLIOptions are the options every agent-CLI backend takes.
type CLIOptions struct {
	// Command is the executable; a relative path with a slash is resolved
	// against the directory of the file that configured the backend.
	Command string
	// Env adds to Purser's environment: settings such as a base URL or HOME.
	// Secrets come from Purser's own environment, never from files.
	Env map[string]string
}

// SplitCLIOptions takes command and env out of a backend spec's options and
// returns them, with the options left for the backend's own keys.
func SplitCLIOptions(backend string, spec purser.BackendSpec, defaultCommand string) (CLIOptions, map[string]any, error) {
	o := CLIOptions{Command: defaultCommand}
	rest := map[string]any{}
	for k, v := range spec.Options {
		switch k {
		case "command":
			s, ok := v.(string)
			if !ok || s == "" {
				return o, nil, fmt.Errorf("%s backend: option command must be a non-empty string", backend)
			}
			o.Command = s
		case "env":
			m, ok := v.(map[string]any)
			if !ok {
				return o, nil, fmt.Errorf("%s backend: option env must be a mapping of variable to value", backend)
			}
			o.Env = map[string]string{}
			for ek, ev := range m {
				o.Env[ek] = fmt.Sprint(ev)
			}
		default:
			rest[k] = v
		}
	}
	if o.Command == "" {
		return o, nil, errors.New(backend + " backend: option command must not be empty")
	}
	if !filepath.IsAbs(o.Command) && strings.Contains(o.Command, "/") {
		o.Command = filepath.Join(spec.Dir, o.Command)
	}
	return o, rest, nil
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

// UnknownOption is the error for a backend option nobody reads.
func UnknownOption(backend, key string, known ...string) error {
	return fmt.Errorf("%s backend: unknown option %q (want %s)", backend, key, strings.Join(append([]string{"command", "env"}, known...), ", "))
}

// StringList decodes an option holding a list of strings.
func StringList(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, a := range list {
		s, ok := a.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
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
