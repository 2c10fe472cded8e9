package backendtest

import (
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser"
)

// AgentCLI returns a Harness.New for a backend of type typ that runs an
// agent CLI given by its "command" and "env" options (claude, codex,
// gemini): the command is the scripted agent (AgentCommand), and the
// environment is the agent's, plus each variable of homes set to its
// directory under the script's state, where the CLI keeps its settings and
// session files. newBackend builds the backend; an error fails the test.
func AgentCLI[B purser.Backend](typ string, newBackend func(purser.BackendSpec) (B, error), homes map[string]string) func(*testing.T, Script) purser.Backend {
	return func(t *testing.T, s Script) purser.Backend {
		t.Helper()
		path, env := AgentCommand(t, s)
		envOpt := map[string]any{}
		for name, dir := range homes {
			envOpt[name] = filepath.Join(s.State, dir)
		}
		for k, v := range env {
			envOpt[k] = v
		}
		return Build(t, newBackend, purser.BackendSpec{Type: typ, Dir: s.State, Options: map[string]any{"command": path, "env": envOpt}})
	}
}

// Build is the backend newBackend builds from spec, for a Harness.New; an
// error fails the test.
func Build[B purser.Backend](t testing.TB, newBackend func(purser.BackendSpec) (B, error), spec purser.BackendSpec) purser.Backend {
	t.Helper()
	b, err := newBackend(spec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Testdata is the absolute path of the package's testdata/name, for a
// Replay's File: the scripted agent runs in another directory.
func Testdata(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
