package config_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/backend/codex"
	agentexec "github.com/purser-dev/purser/backend/exec"
	"github.com/purser-dev/purser/backend/gemini"
	"github.com/purser-dev/purser/backend/openai"
	"github.com/purser-dev/purser/backend/sim"
	"github.com/purser-dev/purser/config"
)

// backendTypes are the real backend types, wired as cmd/purser wires them.
func backendTypes() config.BackendTypes {
	return config.BackendTypes{"sim": sim.NewOptions, "claude": claude.NewOptions, "codex": codex.NewOptions,
		"exec": agentexec.NewOptions, "openai": openai.NewOptions, "gemini": gemini.NewOptions}
}

// taskHead is the start of every task file below; the backend follows from
// line 6, so a problem on the backend's third line is on line 8.
const taskHead = "id: t\ngoal: g\nworkspace: ./ws\nvalidators: [{name: v, run: 'true'}]\nbudget: {hard: {maxIterations: 2}}\n"

// Everything that can be checked before a cent is spent is checked when the
// task is loaded, and each problem names its file, line, column and field.
func TestLoadTaskChecksBackendOptionsBeforeSpending(t *testing.T) {
	t.Setenv("PURSER_TEST_SET_KEY", "sk-test-value-never-printed")
	tests := []struct {
		name    string
		task    string // after taskHead
		project string // purser.yaml, if any
		want    []string
	}{
		{"typo in an option", "backend:\n  type: sim\n  script: sim.yaml\n  transcipt: calls.jsonl\n", "",
			[]string{"task.yaml:9:14: backend.transcipt: unknown option (known: callTimeout, models, script, transcript, type)"}},
		{"typo in a CLI backend's option", "backend:\n  type: claude\n  command: ./fake-cli\n  permisionMode: plan\n", "",
			[]string{"task.yaml:9:18: backend.permisionMode: unknown option (known: allowedTools, budgetFence, callTimeout, command, env, maxTurns, models, permissionMode, type)"}},
		{"bad type", "backend:\n  type: simm\n  script: sim.yaml\n", "",
			[]string{`task.yaml:7:9: backend.type: "simm" is not a backend type (known: claude, codex, exec, gemini, openai, sim)`}},
		{"no type", "backend:\n  script: sim.yaml\n", "",
			[]string{"task.yaml:7:9: backend.type: is required: one of claude, codex, exec, gemini, openai, sim"}},
		{"wrong option type: a word for a number", "backend:\n  type: claude\n  command: ./fake-cli\n  maxTurns: ten\n", "",
			[]string{`task.yaml:9:13: backend.maxTurns: want a whole number, got the string "ten"`}},
		{"wrong option type: a fraction for a number", "backend:\n  type: claude\n  command: ./fake-cli\n  maxTurns: 2.5\n", "",
			[]string{"task.yaml:9:13: backend.maxTurns: want a whole number, got 2.5"}},
		{"wrong option type: a number for a string", "backend:\n  type: sim\n  script: 5\n", "",
			[]string{"task.yaml:8:11: backend.script: want a string, got 5"}},
		{"wrong option type: a word for a list", "backend:\n  type: claude\n  command: ./fake-cli\n  allowedTools: Bash\n", "",
			[]string{`task.yaml:9:17: backend.allowedTools: want a list, got the string "Bash"`}},
		{"wrong option type: inside a list", "backend:\n  type: exec\n  command: [./fake-cli, 7]\n", "",
			[]string{"task.yaml:8:25: backend.command[1]: want a string, got 7"}},
		{"wrong option type: a string where exec wants a list", "backend:\n  type: exec\n  command: ./fake-cli\n", "",
			[]string{`task.yaml:8:12: backend.command: want a list, got the string "./fake-cli"`}},
		{"bad option value", "backend:\n  type: codex\n  command: ./fake-cli\n  sandbox: everything\n", "",
			[]string{`task.yaml:9:12: backend.sandbox: "everything": want read-only, workspace-write, danger-full-access`}},
		{"missing script", "backend:\n  type: sim\n", "",
			[]string{"task.yaml:7:7: backend.script: is required: a YAML file with steps:"}},
		{"script file missing", "backend:\n  type: sim\n  script: nope.yaml\n", "",
			[]string{"task.yaml:8:11: backend.script: cannot read the script: stat ", "nope.yaml: no such file or directory"}},
		{"invalid script", "backend:\n  type: sim\n  script: bad-sim.yaml\n", "",
			[]string{"task.yaml:8:11: backend.script: ", `bad-sim.yaml:3:11: steps[0].fail: "sometimes": want transient or fatal`}},
		{"agent CLI not on the PATH", "backend:\n  type: claude\n", "",
			[]string{`task.yaml:7:7: backend.command: "claude" is not on the PATH`}},
		{"command path missing", "backend:\n  type: gemini\n  command: ./no-such-cli\n", "",
			[]string{"task.yaml:8:12: backend.command: ", "no-such-cli does not exist"}},
		{"command not executable", "backend:\n  type: codex\n  command: ./sim.yaml\n", "",
			[]string{"task.yaml:8:12: backend.command: ", "sim.yaml is not executable"}},
		{"exec program not on the PATH", "backend:\n  type: exec\n  command: [no-such-agent-program, --fast]\n", "",
			[]string{`task.yaml:8:13: backend.command[0]: "no-such-agent-program" is not on the PATH`}},
		{"API key variable not set", "backend:\n  type: openai\n  apiKeyEnv: PURSER_TEST_UNSET_KEY\n", "",
			[]string{"task.yaml:8:14: backend.apiKeyEnv: the environment variable PURSER_TEST_UNSET_KEY is not set"}},
		{"default API key variable not set", "backend:\n  type: openai\n  baseUrl: http://127.0.0.1:1/v1\n", "",
			[]string{"task.yaml:7:7: backend.apiKeyEnv: the environment variable OPENAI_API_KEY is not set"}},
		{"bad base URL", "backend:\n  type: openai\n  apiKeyEnv: PURSER_TEST_SET_KEY\n  baseUrl: openrouter.ai\n", "",
			[]string{`task.yaml:9:12: backend.baseUrl: "openrouter.ai": want an http or https URL`}},
		{"workspace missing", "backend:\n  type: sim\n  script: sim.yaml\n", "",
			[]string{"task.yaml:3:12: workspace: ", "ws does not exist"}},
		{"workspace is a file", "backend:\n  type: sim\n  script: sim.yaml\n", "",
			[]string{"task.yaml:3:12: workspace: ", "ws is not a directory"}},
		{"typo in purser.yaml, even in a backend the task does not use", "backend: mine\n",
			"backends:\n  mine:\n    type: sim\n    script: sim.yaml\n  other:\n    type: claude\n    comand: claude\n",
			[]string{"purser.yaml:7:13: backends.other.comand: unknown option (known: "}},
		{"named backend's command checked where it is configured", "backend: mine\n",
			"backends:\n  mine:\n    type: exec\n    command: [./no-such-agent]\n",
			[]string{"purser.yaml:4:15: backends.mine.command[0]: ", "no-such-agent does not exist"}},
		{"several problems, each located", "backend:\n  type: sim\n  script: nope.yaml\nmodelTier: standard\n", "",
			[]string{"task.yaml:3:12: workspace: ", "task.yaml:8:11: backend.script: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("PATH", t.TempDir()) // no agent CLI is installed
			t.Setenv("OPENAI_API_KEY", "")
			write(t, filepath.Join(dir, "sim.yaml"), "steps:\n  - usage: {inputTokens: 1}\n")
			write(t, filepath.Join(dir, "bad-sim.yaml"), "steps:\n  - usage: {inputTokens: 1}\n    fail: sometimes\n")
			write(t, filepath.Join(dir, "fake-cli"), "#!/bin/sh\n")
			if err := os.Chmod(filepath.Join(dir, "fake-cli"), 0o755); err != nil {
				t.Fatal(err)
			}
			switch tt.name {
			case "workspace is a file":
				write(t, filepath.Join(dir, "ws"), "")
			case "workspace missing", "several problems, each located":
			default:
				if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tt.project != "" {
				write(t, filepath.Join(dir, config.ProjectFileName), tt.project)
			}
			path := filepath.Join(dir, "task.yaml")
			write(t, path, taskHead+tt.task)
			_, _, err := config.Loader{Backends: backendTypes()}.LoadTask(path)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
			t.Log(msg)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error\n%s\ndoes not contain\n%s", msg, w)
				}
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Errorf("error is %T, want a *config.Error", err)
			}
			if strings.Contains(msg, "sk-test-value") {
				t.Errorf("a key's value reached the error: %s", msg)
			}
			if strings.Count(msg, "backend") > strings.Count(strings.Join(tt.want, " "), "backend")+1 {
				t.Errorf("the backend is named more than once: %s", msg)
			}
		})
	}
}

// A task whose backend is fine loads, with its options typed; backends of
// the project that the task does not run on are decoded and validated, but
// not looked for on this machine.
func TestLoadTaskAcceptsGoodBackendOptions(t *testing.T) {
	dir := t.TempDir()
	bin := t.TempDir()
	t.Setenv("PATH", bin)
	t.Setenv("PURSER_TEST_SET_KEY", "sk-test")
	write(t, filepath.Join(bin, "claude"), "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(bin, "claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, config.ProjectFileName), "backends:\n"+
		"  claude:\n    type: claude\n    models: {standard: claude-sonnet-4-5}\n    maxTurns: 3\n    budgetFence: false\n    env: {HOME: /tmp/h}\n"+
		"  codex:\n    type: codex\n    sandbox: read-only\n"+ // not installed, not used: fine
		"  router:\n    type: openai\n    apiKeyEnv: PURSER_TEST_SET_KEY\n    baseUrl: https://openrouter.ai/api/v1\n")
	for _, tt := range []struct{ backend, wantType string }{{"claude", "*claude.Options"}, {"router", "*openai.Options"}} {
		path := filepath.Join(dir, tt.backend+".yaml")
		write(t, path, taskHead+"backend: "+tt.backend+"\n")
		task, _, err := config.Loader{Backends: backendTypes()}.LoadTask(path)
		if err != nil {
			t.Fatalf("%s: %v", tt.backend, err)
		}
		switch o := task.Backend.Options.(type) {
		case *claude.Options:
			if o.MaxTurns != 3 || o.BudgetFence || o.Env["HOME"] != "/tmp/h" || o.PermissionMode != "acceptEdits" || o.Command != "claude" {
				t.Errorf("claude options %+v: want the file's values over the defaults", o)
			}
		case *openai.Options:
			if o.APIKeyEnv != "PURSER_TEST_SET_KEY" || o.MaxTokensField != "max_tokens" {
				t.Errorf("openai options %+v", o)
			}
		default:
			t.Errorf("%s: options are %T, want %s", tt.backend, o, tt.wantType)
		}
	}
}

// config reads backends' options without knowing any backend: the concrete
// types are wired by its caller.
func TestConfigImportsNoBackend(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "github.com/purser-dev/purser/config").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, imp := range strings.Fields(string(out)) {
		if strings.Contains(imp, "purser/backend/") {
			t.Errorf("config imports %s", imp)
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
