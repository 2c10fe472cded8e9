package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/sandbox"
)

// purser init writes the box's mode into purser.yaml: on where a box can be
// made, off with Available's reason where none can, so the choice is visible
// in the file; both load, with that mode said (not left to the default).
func TestInitWritesTheSandboxMode(t *testing.T) {
	noBox := fmt.Errorf("%w: bwrap not found: install bubblewrap", sandbox.ErrUnavailable)
	for _, c := range []struct {
		noBox error
		mode  sandbox.Mode
		want  []string
	}{
		{nil, sandbox.ModeOn, []string{"\nsandbox: on\n", "its validators are boxed"}},
		{noBox, sandbox.ModeOff, []string{"\nsandbox: off\n", "#   sandbox unavailable: bwrap not found: install bubblewrap\n", "run unboxed, as you, knowingly"}},
	} {
		text := initProject(c.noBox)
		for _, w := range c.want {
			if !strings.Contains(text, w) {
				t.Errorf("purser.yaml (no box: %v) lacks %q:\n%s", c.noBox, w, text)
			}
		}
		path := filepath.Join(t.TempDir(), config.ProjectFileName)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := config.LoadProject(path)
		if err != nil {
			t.Fatalf("purser.yaml as init writes it does not load: %v", err)
		}
		if p.Sandbox.Mode != c.mode {
			t.Errorf("sandbox: = %q, want %q said in the file", p.Sandbox.Mode, c.mode)
		}
	}
}
