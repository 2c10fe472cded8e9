package app

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/sandbox"
)

// An agent that adds a destination to the network.allow of the purser.yaml
// in its workspace (a way out for its data) is refused on resume, by name.
func TestPinsHoldTheNetworkAllowList(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	ws := filepath.Join(dir, "ws")
	proj := &config.Project{File: filepath.Join(ws, "purser.yaml"), Dir: ws,
		Sandbox: sandbox.Setting{Mode: sandbox.ModeOn, Allow: []string{"registry.npmjs.org:443"}}}
	task := purser.Task{ID: "t", Workspace: ws, File: filepath.Join(ws, "task.yaml"), Backend: purser.BackendSpec{Name: "sim", Type: "sim"}}
	commit, err := CheckPins(io.Discard, proj, []purser.Task{task}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	proj.Sandbox.Allow = append(proj.Sandbox.Allow, "exfil.example:443")
	_, err = CheckPins(io.Discard, proj, []purser.Task{task}, false)
	if !errors.Is(err, ErrConfigChanged) || !strings.Contains(err.Error(), "exfil.example:443") {
		t.Fatalf("an added destination: got %v, want ErrConfigChanged naming it", err)
	}
}

// An agent that raises the box's bounds (processes:, memoryMiB:) in the
// purser.yaml in its workspace is refused on resume too: the pin writes
// every bound it sets.
func TestPinsHoldTheBoxBounds(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	ws := filepath.Join(dir, "ws")
	proj := &config.Project{File: filepath.Join(ws, "purser.yaml"), Dir: ws,
		Sandbox: sandbox.Setting{Mode: sandbox.ModeOn, Processes: 64}}
	task := purser.Task{ID: "t", Workspace: ws, File: filepath.Join(ws, "task.yaml"), Backend: purser.BackendSpec{Name: "sim", Type: "sim"}}
	commit, err := CheckPins(io.Discard, proj, []purser.Task{task}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	proj.Sandbox.Processes, proj.Sandbox.MemoryMiB = 100000, 1<<20
	_, err = CheckPins(io.Discard, proj, []purser.Task{task}, false)
	if !errors.Is(err, ErrConfigChanged) || !strings.Contains(err.Error(), "processes 100000") {
		t.Fatalf("raised bounds: got %v, want ErrConfigChanged naming them", err)
	}
}
