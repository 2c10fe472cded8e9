package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/sandbox"
)

// boxOptions play the exec backend's options: Boxable.
type boxOptions struct {
	Command string `yaml:"command"`
	box     backend.SandboxConfig
}

func (o *boxOptions) Validate() error                    { return nil }
func (o *boxOptions) Check(string) error                 { return nil }
func (o *boxOptions) SetSandbox(c backend.SandboxConfig) { o.box = c }
func (o *boxOptions) Sandbox() backend.SandboxConfig     { return o.box }
func (o *plainOptions) Validate() error                  { return nil }
func (o *plainOptions) Check(string) error               { return nil }

// plainOptions play a backend that cannot be boxed (an agent CLI).
type plainOptions struct {
	Command string `yaml:"command"`
}

var boxTypes = backend.Types{
	"box":   func() backend.Options { return &boxOptions{} },
	"plain": func() backend.Options { return &plainOptions{} },
}

func loadBoxProject(t *testing.T, yaml string) (*config.Project, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "purser.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Loader{Backends: boxTypes}.LoadProject(path)
}

func TestSandboxSettingForms(t *testing.T) {
	p, err := loadBoxProject(t, `sandbox: {mode: on, readOnly: [/opt/tools, rel], env: [GOFLAGS]}
backends:
  own: {type: box, sandbox: off}
  inherits: {type: box}
  plainoff: {type: plain, sandbox: off}
`)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Sandbox.On() || !slices.Equal(p.Sandbox.Env, []string{"GOFLAGS"}) || p.Sandbox.ReadOnly[0] != "/opt/tools" || p.Sandbox.ReadOnly[1] != filepath.Join(p.Dir, "rel") {
		t.Fatalf("project sandbox = %+v", p.Sandbox)
	}
	own := p.Backends["own"].Options.(*boxOptions).box
	inh := p.Backends["inherits"].Options.(*boxOptions).box
	if own.Mode != sandbox.ModeOff || !inh.On() || !slices.Equal(inh.Env, []string{"GOFLAGS"}) {
		t.Fatalf("own = %+v, inherits = %+v: a backend's key overrides the project's, else the project's holds", own, inh)
	}
	if inh.Homes != config.BoxHomes(p.Dir) || strings.HasPrefix(inh.Homes, p.Dir) {
		t.Fatalf("homes = %q: want the project's state directory, outside it", inh.Homes)
	}

	p, err = loadBoxProject(t, "backends:\n  b: {type: box}\n  s: {type: plain}\n")
	if err != nil || p.Sandbox.Mode != "" || !p.Sandbox.Resolved().On() || !p.Backends["b"].Options.(*boxOptions).box.On() {
		t.Fatalf("default must be on (said by no one, in force for the boxable backend; the unboxable one loads, in-process): %+v, %v", p, err)
	}
	p, err = loadBoxProject(t, "sandbox: off\nbackends:\n  b: {type: box}\n")
	if err != nil || p.Sandbox.Resolved().On() || p.Backends["b"].Options.(*boxOptions).box.Mode != sandbox.ModeOff {
		t.Fatalf("sandbox: off must reach the backend: %+v, %v", p, err)
	}
	p, err = loadBoxProject(t, "sandbox: on\nbackends:\n  b: {type: plain}\n")
	if err != nil || !p.Sandbox.On() {
		t.Fatalf("sandbox: on is for the validators and every boxable backend; an unboxable one runs in-process: %+v, %v", p, err)
	}
	p, err = loadBoxProject(t, "sandbox: on\n")
	if err != nil || !p.Sandbox.On() {
		t.Fatalf("sandbox: on = %+v, %v", p.Sandbox, err)
	}
}

func TestSandboxSettingRefusedLocated(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"sandbox: maybe\n", "purser.yaml:1:10: sandbox: want off, on or"},
		{"sandbox: {mode: on, network: x}\n", "sandbox.network: want {allow: [host:port, ...]}, got x"},
		{"sandbox: {mode: on, network: {allow: [registry.npmjs.org]}}\n", `sandbox.network.allow[0]: "registry.npmjs.org" is not host:port`},
		{"sandbox: {mode: on, net: {}}\n", "sandbox.net: unknown key (known: env, memoryMiB, mode, network, processes, readOnly)"},
		{"sandbox: {readOnly: [/x]}\n", "sandbox.mode: is required"},
		{"sandbox: {mode: on, env: [PGPASSWORD]}\n", "sandbox.env[0]: PGPASSWORD never enters a box"},
		{"sandbox: {mode: on, env: [SLACK_WEBHOOK_URL]}\n", "SLACK_WEBHOOK_URL never enters a box"},
		{"sandbox: {mode: on, env: [\"A B\"]}\n", "is not an environment variable name"},
		{"sandbox: {mode: sometimes}\n", "sandbox.mode: want off or on"},
		{"backends:\n  b:\n    type: box\n    sandbox: {mode: on, bogus: 1}\n", "purser.yaml:4:"},
		{"backends:\n  b:\n    type: plain\n    sandbox: on\n", "backends.b.sandbox: backend type plain cannot run in a box yet"},
	} {
		_, err := loadBoxProject(t, c.yaml)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.yaml, err, c.want)
		}
	}
}

// Codex's own sandbox: option (its sandbox mode) stays Codex's: its values
// never overlap Purser's off, on or mapping.
func TestSandboxKeyOfATypeWithItsOwn(t *testing.T) {
	types := backend.Types{"codexlike": func() backend.Options { return &codexOptions{} }}
	dir := t.TempDir()
	path := filepath.Join(dir, "purser.yaml")
	if err := os.WriteFile(path, []byte("backends:\n  c: {type: codexlike, sandbox: workspace-write}\n  d: {type: codexlike, sandbox: off}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := config.Loader{Backends: types}.LoadProject(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Backends["c"].Options.(*codexOptions).Sandbox; got != "workspace-write" {
		t.Errorf("codex's own sandbox = %q", got)
	}
	if got := p.Backends["d"].Options.(*codexOptions).Sandbox; got != "" {
		t.Errorf("sandbox: off went to the type: %q", got)
	}
}

type codexOptions struct {
	Sandbox string `yaml:"sandbox"`
}

func (o *codexOptions) Validate() error    { return nil }
func (o *codexOptions) Check(string) error { return nil }

// network: {allow: [...]} on the project reaches a backend that inherits
// it; a backend's own sandbox: holds its own list.
func TestSandboxNetworkAllow(t *testing.T) {
	p, err := loadBoxProject(t, `sandbox: {mode: on, network: {allow: ["registry.npmjs.org:443", "*.golang.org:443"]}}
backends:
  inherits: {type: box}
  own: {type: box, sandbox: {mode: on, network: {allow: [pypi.org:443]}}}
`)
	if err != nil {
		t.Fatal(err)
	}
	inh := p.Backends["inherits"].Options.(*boxOptions).box
	own := p.Backends["own"].Options.(*boxOptions).box
	if !slices.Equal(inh.Allow, []string{"registry.npmjs.org:443", "*.golang.org:443"}) || !slices.Equal(own.Allow, []string{"pypi.org:443"}) {
		t.Fatalf("inherits %q, own %q", inh.Allow, own.Allow)
	}
}
