package proc_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/backend/codex"
	agentexec "github.com/purser-dev/purser/backend/exec"
	"github.com/purser-dev/purser/backend/gemini"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/config"
)

// A CLI backend's New finds its program and decodes its options strictly;
// its errors name the option and never repeat the backend's name (the
// engine says it once).
func TestCLIBackendsRefuseBadOptionsByName(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", t.TempDir()) // no agent CLI is installed
	if err := os.WriteFile(filepath.Join(dir, "fake-cli"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "not-executable"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "a-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	news := map[string]func(purser.BackendSpec) error{
		"claude": func(s purser.BackendSpec) error { _, err := claude.New(s); return err },
		"codex":  func(s purser.BackendSpec) error { _, err := codex.New(s); return err },
		"gemini": func(s purser.BackendSpec) error { _, err := gemini.New(s); return err },
		"exec":   func(s purser.BackendSpec) error { _, err := agentexec.New(s); return err },
	}
	for _, tt := range []struct {
		backend string
		options map[string]any
		want    string // "" for no error
	}{
		{"claude", map[string]any{}, `command: "claude" is not on the PATH`},
		{"codex", map[string]any{}, `command: "codex" is not on the PATH`},
		{"gemini", map[string]any{}, `command: "gemini" is not on the PATH`},
		{"claude", map[string]any{"command": "./fake-cli"}, ""},
		{"claude", map[string]any{"command": "./not-executable"}, "command: " + filepath.Join(dir, "not-executable") + " is not executable"},
		{"gemini", map[string]any{"command": "./a-dir"}, "command: " + filepath.Join(dir, "a-dir") + " is a directory"},
		{"codex", map[string]any{"command": "./no-such-cli"}, "command: " + filepath.Join(dir, "no-such-cli") + " does not exist"},
		{"claude", map[string]any{"command": "./fake-cli", "maxTurn": uint64(3)}, "maxTurn: unknown option (known: allowedTools, budgetFence, command, env, keyFile, login, maxTurns, permissionMode, wireMeter)"},
		{"claude", map[string]any{"command": "./fake-cli", "maxTurns": -1}, "maxTurns: must not be negative, got -1"},
		{"claude", map[string]any{"command": "./fake-cli", "budgetFence": "no"}, `budgetFence: want true or false, got the string "no"`},
		{"claude", map[string]any{"command": "./fake-cli", "env": map[string]any{"HOME": uint64(1)}}, "env.HOME: want a string, got 1"},
		{"codex", map[string]any{"command": "./fake-cli", "sandbox": "none"}, `sandbox: "none": want read-only, workspace-write, danger-full-access`},
		{"codex", map[string]any{"command": "./fake-cli", "args": "--yolo"}, `args: want a list, got the string "--yolo"`},
		{"gemini", map[string]any{"command": "./fake-cli", "approvalMode": ""}, "approvalMode: must not be empty"},
		{"gemini", map[string]any{"command": "", "approvalMode": "yolo"}, "command: must not be empty"},
		{"exec", map[string]any{}, "command: is required: [program, args...]"},
		{"exec", map[string]any{"command": []any{"no-such-agent-program"}}, `command[0]: "no-such-agent-program" is not on the PATH`},
		{"exec", map[string]any{"command": []any{"./fake-cli", "--fast"}}, ""},
	} {
		t.Run(tt.backend+"/"+tt.want, func(t *testing.T) {
			err := news[tt.backend](purser.BackendSpec{Type: tt.backend, Dir: dir, Options: tt.options})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == "":
			case err == nil || !strings.HasPrefix(err.Error(), tt.want):
				t.Fatalf("err = %v, want it to start with %q", err, tt.want)
			case strings.Contains(err.Error(), tt.backend+" backend"):
				t.Fatalf("err = %v names the backend: the engine does", err)
			}
		})
	}
}

func TestFindCommand(t *testing.T) {
	bin := t.TempDir()
	t.Setenv("PATH", bin)
	if err := os.WriteFile(filepath.Join(bin, "agent"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := proc.FindCommand("agent"); err != nil || p != filepath.Join(bin, "agent") {
		t.Fatalf("FindCommand(agent) = %q, %v", p, err)
	}
	if _, err := proc.FindCommand("missing"); err == nil || !strings.Contains(err.Error(), `"missing" is not on the PATH`) {
		t.Fatalf("FindCommand(missing) err = %v", err)
	}
}

// The agent CLI or exec program is looked for when the task file is loaded,
// before anything is spent: in the task file, or in purser.yaml for a
// backend named there, each problem names the file, line and option.
func TestLoadTaskFindsTheAgentProgram(t *testing.T) {
	types := backend.Types{"claude": claude.NewOptions, "codex": codex.NewOptions, "gemini": gemini.NewOptions, "exec": agentexec.NewOptions}
	for _, tt := range []struct{ name, backend, project, want string }{
		{"claude not installed", "backend:\n  type: claude\n", "", `task.yaml:7:7: backend.command: "claude" is not on the PATH`},
		{"codex's command missing", "backend:\n  type: codex\n  command: ./no-such-cli\n", "", "task.yaml:8:12: backend.command: DIR/no-such-cli does not exist"},
		{"gemini's command not executable", "backend:\n  type: gemini\n  command: ./task.yaml\n", "", "task.yaml:8:12: backend.command: DIR/task.yaml is not executable"},
		{"exec program not on the PATH", "backend:\n  type: exec\n  command: [no-such-agent-program, --fast]\n", "", `task.yaml:8:13: backend.command[0]: "no-such-agent-program" is not on the PATH`},
		{"named in purser.yaml", "backend: mine\n", "backends:\n  mine:\n    type: codex\n    models: {standard: gpt-5.5}\n",
			`purser.yaml:3:9: backends.mine.command: "codex" is not on the PATH`},
		{"wrong option type", "backend:\n  type: claude\n  allowedTools: Bash\n", "", `task.yaml:8:17: backend.allowedTools: want a list, got the string "Bash"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("PATH", t.TempDir()) // no agent CLI is installed
			path := filepath.Join(dir, "task.yaml")
			if err := os.WriteFile(path, []byte("id: t\ngoal: g\nworkspace: .\nvalidators: [{name: v, run: 'true'}]\nbudget: {hard: {maxIterations: 2}}\n"+tt.backend), 0o644); err != nil {
				t.Fatal(err)
			}
			if tt.project != "" {
				if err := os.WriteFile(filepath.Join(dir, config.ProjectFileName), []byte(tt.project), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, _, err := config.Loader{Backends: types}.LoadTask(path)
			want := strings.NewReplacer("task.yaml:", path+":", "purser.yaml:", filepath.Join(dir, "purser.yaml")+":", "DIR", dir).Replace(tt.want)
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("err = %v, want it to start with %q", err, want)
			}
		})
	}
}
