package app

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/config"
)

// A pinned database URL keeps its password out of the pin file and the
// diff, yet a changed password is a change.
func TestPinsKeepSecretsOut(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	ws := filepath.Join(dir, "ws")
	proj := &config.Project{File: filepath.Join(ws, "purser.yaml"), Dir: ws, DatabaseSet: true,
		Database: "postgres://u:hunter2secret@db:5432/p"}
	task := purser.Task{ID: "t", Workspace: ws, File: filepath.Join(ws, "task.yaml"), Backend: purser.BackendSpec{Name: "sim", Type: "sim"}}
	commit, err := CheckPins(io.Discard, proj, []purser.Task{task}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(PinDir(), "*.json"))
	if len(files) != 1 {
		t.Fatalf("pin files: %v", files)
	}
	b, _ := os.ReadFile(files[0])
	if strings.Contains(string(b), "hunter2secret") {
		t.Fatalf("the pin file holds the password:\n%s", b)
	}
	proj.Database = "postgres://u:other@db:5432/p"
	_, err = CheckPins(io.Discard, proj, []purser.Task{task}, false)
	if !errors.Is(err, ErrConfigChanged) {
		t.Fatalf("a changed password: got %v, want ErrConfigChanged", err)
	}
	if strings.Contains(err.Error(), "other@") || strings.Contains(err.Error(), "hunter2secret") {
		t.Fatalf("the diff shows a password: %v", err)
	}
}

// A task whose files lie outside its workspace pins nothing.
func TestPinsOnlyInsideWorkspace(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	proj := &config.Project{File: filepath.Join(dir, "purser.yaml"), Dir: dir}
	task := purser.Task{ID: "t", Workspace: filepath.Join(dir, "ws"), File: filepath.Join(dir, "task.yaml")}
	commit, err := CheckPins(io.Discard, proj, []purser.Task{task}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(PinDir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pins written for files outside the workspace: %v", err)
	}
}
