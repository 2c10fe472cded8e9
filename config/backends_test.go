package config_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/config"
)

// sharedOptions play the part of proc.CLIOptions: keys embedded inline.
type sharedOptions struct {
	Command string            `yaml:"command"`
	Env     map[string]string `yaml:"env"`
}

// agentOptions play a CLI backend's options.
type agentOptions struct {
	sharedOptions `yaml:",inline"`
	MaxTurns      int      `yaml:"maxTurns"`
	Tools         []string `yaml:"tools"`
	Fence         bool     `yaml:"fence"`
	KeyEnv        string   `yaml:"keyEnv"`
	internal      string   // not an option: unexported fields are skipped
}

func (o agentOptions) Validate() error {
	if o.internal != "" {
		return errors.New("an unexported field was decoded")
	}
	if o.MaxTurns < 0 {
		return &backend.OptionError{Option: "maxTurns", Msg: "must not be negative"}
	}
	return nil
}

func (o agentOptions) Check(string) error {
	var errs []error
	if o.Command == "missing-cli" {
		errs = append(errs, &backend.OptionError{Option: "command", Msg: `"missing-cli" is not on the PATH`})
	}
	if o.KeyEnv != "" && os.Getenv(o.KeyEnv) == "" {
		errs = append(errs, &backend.OptionError{Option: "keyEnv", Msg: o.KeyEnv + " is not set"})
	}
	if o.Command == "broken" {
		errs = append(errs, errors.New("the agent is broken"))
	}
	return errors.Join(errs...)
}

// scriptOptions play the sim backend's options: a file that must exist.
type scriptOptions struct {
	Script string `yaml:"script"`
}

func (o scriptOptions) Validate() error {
	if o.Script == "" {
		return &backend.OptionError{Option: "script", Msg: "is required"}
	}
	return nil
}

func (o scriptOptions) Check(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, o.Script)); err != nil {
		return &backend.OptionError{Option: "script", Msg: "cannot be read", Err: err}
	}
	return nil
}

func fakeTypes() backend.Types {
	return backend.Types{
		"agent": func() backend.Options {
			return &agentOptions{sharedOptions: sharedOptions{Command: "agent"}, Fence: true}
		},
		"script": func() backend.Options { return &scriptOptions{} },
		// keyed's key variable is set by default, not in the file.
		"keyed": func() backend.Options { return &agentOptions{KeyEnv: "PURSER_TEST_UNSET_KEY"} },
	}
}

// taskHead is the start of every task file below; the backend follows from
// line 6, so a problem on the backend's third line is on line 8.
const taskHead = "id: t\ngoal: g\nworkspace: ./ws\nvalidators: [{name: v, run: 'true'}]\nbudget: {hard: {maxIterations: 2}}\n"

// Everything that can be checked before a cent is spent is checked when the
// task is loaded, and each problem names its file, line, column and field.
func TestLoadTaskChecksBackendOptionsBeforeSpending(t *testing.T) {
	t.Setenv("PURSER_TEST_SET_KEY", "sk-test-value-never-printed")
	t.Setenv("PURSER_TEST_UNSET_KEY", "")
	tests := []struct {
		name    string
		task    string // after taskHead
		project string // purser.yaml, if any
		noWS    bool   // no workspace directory
		want    []string
	}{
		{"typo in an option", "backend:\n  type: script\n  script: s.yaml\n  scirpt: s.yaml\n", "", false,
			[]string{"task.yaml:9:11: backend.scirpt: unknown option (known: billing, callTimeout, models, sandbox, script, stallTimeout, type, unpricedModel)"}},
		{"typo in an inline option", "backend:\n  type: agent\n  comand: x\n", "", false,
			[]string{"task.yaml:8:11: backend.comand: unknown option (known: billing, callTimeout, command, env, fence, keyEnv, maxTurns, models, sandbox, stallTimeout, tools, type, unpricedModel)"}},
		{"an unexported field is not an option", "backend:\n  type: agent\n  internal: x\n", "", false,
			[]string{"task.yaml:8:13: backend.internal: unknown option"}},
		{"bad type", "backend:\n  type: scirpt\n", "", false,
			[]string{`task.yaml:7:9: backend.type: "scirpt" is not a backend type (known: agent, keyed, script)`}},
		{"no type", "backend:\n  script: s.yaml\n", "", false,
			[]string{"task.yaml:7:9: backend.type: is required: one of agent, keyed, script"}},
		{"type not a string", "backend:\n  type: [agent]\n", "", false,
			[]string{"task.yaml:7:9: backend.type: want a backend type such as agent, keyed, script"}},
		{"a word for a number", "backend:\n  type: agent\n  maxTurns: ten\n", "", false,
			[]string{`task.yaml:8:13: backend.maxTurns: want a whole number, got the string "ten"`}},
		{"a fraction for a number", "backend:\n  type: agent\n  maxTurns: 2.5\n", "", false,
			[]string{"task.yaml:8:13: backend.maxTurns: want a whole number, got 2.5"}},
		{"a number too large", "backend:\n  type: agent\n  maxTurns: 99999999999999999999\n", "", false,
			[]string{"task.yaml:8:13: backend.maxTurns: want a whole number"}},
		{"a number for a string", "backend:\n  type: script\n  script: 5\n", "", false,
			[]string{"task.yaml:8:11: backend.script: want a string, got 5"}},
		{"null for a string", "backend:\n  type: script\n  script:\n", "", false,
			[]string{"backend.script: want a string, got null"}},
		{"a word for a boolean", "backend:\n  type: agent\n  fence: yes\n", "", false,
			[]string{`task.yaml:8:10: backend.fence: want true or false, got the string "yes"`}},
		{"a word for a list", "backend:\n  type: agent\n  tools: Bash\n", "", false,
			[]string{`task.yaml:8:10: backend.tools: want a list, got the string "Bash"`}},
		{"inside a list", "backend:\n  type: agent\n  tools: [Bash, 7]\n", "", false,
			[]string{"task.yaml:8:17: backend.tools[1]: want a string, got 7"}},
		{"inside a mapping", "backend:\n  type: agent\n  env: {HOME: /h, PORT: 8080}\n", "", false,
			[]string{"task.yaml:8:25: backend.env.PORT: want a string, got 8080"}},
		{"a list for a mapping", "backend:\n  type: agent\n  env: [HOME]\n", "", false,
			[]string{"task.yaml:8:8: backend.env: want a mapping, got a list"}},
		{"every wrong option at once", "backend:\n  type: agent\n  maxTurns: x\n  fence: 1\n", "", false,
			[]string{"task.yaml:8:13: backend.maxTurns: ", "task.yaml:9:10: backend.fence: want true or false, got 1"}},
		{"a stall timeout that is no duration", "backend:\n  type: script\n  script: s.yaml\n  stallTimeout: 2 minutes\n", "", false,
			[]string{"task.yaml:9:17: backend.stallTimeout: 2 minutes: want a duration such as 120s or 5m, or off"}},
		{"a stall timeout of zero", "backend:\n  type: script\n  script: s.yaml\n  stallTimeout: 0s\n", "", false,
			[]string{"task.yaml:9:17: backend.stallTimeout: 0s: want a duration"}},
		{"a value Validate refuses", "backend:\n  type: agent\n  maxTurns: -1\n", "", false,
			[]string{"task.yaml:8:13: backend.maxTurns: must not be negative"}},
		{"missing option", "backend:\n  type: script\n", "", false,
			[]string{"task.yaml:7:7: backend.script: is required"}},
		{"Check fails on an option the file sets", "backend:\n  type: script\n  script: nope.yaml\n", "", false,
			[]string{"task.yaml:8:11: backend.script: cannot be read"}},
		{"Check fails on two options", "backend:\n  type: agent\n  keyEnv: PURSER_TEST_UNSET_KEY\n  command: missing-cli\n", "", false,
			[]string{"task.yaml:8:11: backend.keyEnv: PURSER_TEST_UNSET_KEY is not set\ntask.yaml:9:12: backend.command: \"missing-cli\" is not on the PATH"}},
		{"Check fails on an option left at its default: located at the mapping", "backend:\n  type: keyed\n", "", false,
			[]string{"task.yaml:7:7: backend.keyEnv: PURSER_TEST_UNSET_KEY is not set"}},
		{"Check fails on no one option", "backend:\n  type: agent\n  command: broken\n", "", false,
			[]string{"task.yaml:7:7: backend: the agent is broken"}},
		{"workspace missing", "backend: {type: script, script: s.yaml}\n", "", true,
			[]string{"task.yaml:3:12: workspace: ", "ws does not exist"}},
		{"workspace is a file", "backend: {type: script, script: s.yaml}\nworkspace: ./s.yaml\n", "", false,
			[]string{"task.yaml:6:12: workspace: ", "s.yaml is not a directory"}},
		{"typo in purser.yaml, even in a backend the task does not use", "backend: mine\n",
			"backends:\n  mine:\n    type: script\n    script: s.yaml\n  other:\n    type: agent\n    comand: x\n", false,
			[]string{"purser.yaml:7:13: backends.other.comand: unknown option (known: "}},
		{"bad type in purser.yaml", "backend: mine\n", "backends:\n  mine:\n    type: nope\n", false,
			[]string{`purser.yaml:3:11: backends.mine.type: "nope" is not a backend type (known: agent, keyed, script)`}},
		{"a named backend is checked where it is configured", "backend: mine\n",
			"backends:\n  mine:\n    type: agent\n    command: missing-cli\n", false,
			[]string{`purser.yaml:4:14: backends.mine.command: "missing-cli" is not on the PATH`}},
		{"billing neither api nor subscription", "backend:\n  type: script\n  script: s.yaml\n  billing: plan\n", "", false,
			[]string{`task.yaml:9:12: backend.billing: the string "plan": want api (the default`}},
		{"unpricedModel neither refuse nor allow", "backend:\n  type: script\n  script: s.yaml\n  unpricedModel: true\n", "", false,
			[]string{"task.yaml:9:18: backend.unpricedModel: true: want refuse (the default"}},
		{"a subscription backend under a money cap only: the cap would never act", "backend:\n  type: script\n  script: s.yaml\n  billing: subscription\nbudget: {hard: {usd: 1, maxIterations: 2}}\n", "", false,
			[]string{"task.yaml:9:22:", "budget.hard.usd: backend script bills by subscription", "cap hard.tokens or hard.timeMinutes", "billing: api"}},
		{"the same with the project's budget: located in purser.yaml", "backend: mine\nbudget: null\n",
			"budget: {hard: {usd: 5, maxIterations: 3}}\nbackends:\n  mine:\n    type: script\n    script: s.yaml\n    billing: subscription\n", false,
			[]string{"purser.yaml:1:", "budget.hard.usd: backend mine bills by subscription"}},
		{"several problems, each located", "backend:\n  type: script\n  script: nope.yaml\n", "", true,
			[]string{"task.yaml:3:12: workspace: ", "task.yaml:8:11: backend.script: cannot be read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "s.yaml"), "steps: []\n")
			if !tt.noWS {
				if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tt.project != "" {
				write(t, filepath.Join(dir, config.ProjectFileName), tt.project)
			}
			path := filepath.Join(dir, "task.yaml")
			task := taskHead + tt.task
			if strings.Contains(tt.task, "workspace:") {
				task = strings.Replace(task, "workspace: ./ws\n", "", 1)
			}
			if strings.Contains(tt.task, "budget:") {
				task = strings.Replace(task, "budget: {hard: {maxIterations: 2}}\n", "", 1)
			}
			write(t, path, task)
			_, _, err := config.Loader{Backends: fakeTypes()}.LoadTask(path)
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
		})
	}
}

// A good task loads with its options typed, the file's values over the
// defaults; a backend of the project the task does not run on is decoded and
// validated, but not checked on this machine.
func TestLoadTaskGivesTypedOptions(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, config.ProjectFileName), "backends:\n"+
		"  mine:\n    type: agent\n    models: {standard: m}\n    maxTurns: 3\n    fence: false\n    env: {HOME: /h}\n    tools: [a, b]\n"+
		"  unused:\n    type: agent\n    command: missing-cli\n")
	path := filepath.Join(dir, "task.yaml")
	write(t, path, taskHead+"backend: mine\n")
	task, _, err := config.Loader{Backends: fakeTypes()}.LoadTask(path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := task.Backend.Options.(*agentOptions)
	if !ok {
		t.Fatalf("options are %T, want *agentOptions", task.Backend.Options)
	}
	want := agentOptions{sharedOptions: sharedOptions{Command: "agent", Env: map[string]string{"HOME": "/h"}}, MaxTurns: 3, Tools: []string{"a", "b"}}
	if fmt.Sprint(*got) != fmt.Sprint(want) {
		t.Fatalf("options %+v, want %+v", *got, want)
	}
	// Without types, a loader keeps the options as written, for New.
	task, _, err = config.Loader{}.LoadTask(path)
	if err != nil {
		t.Fatal(err)
	}
	if raw, ok := task.Backend.Options.(map[string]any); !ok || raw["maxTurns"] != uint64(3) {
		t.Fatalf("untyped loader: options %#v", task.Backend.Options)
	}
}

// DecodeOptions gives New the loader's options, or decodes a map
// built in code as strictly, and validates either.
func TestDecodeOptions(t *testing.T) {
	tests := []struct {
		name      string
		options   any
		into      backend.Options
		want      string // error; "" for none
		wantTurns int
	}{
		{"the loader's options", &agentOptions{MaxTurns: 4}, &agentOptions{}, "", 4},
		{"a value of the options' type", agentOptions{MaxTurns: 4}, &agentOptions{}, "", 4},
		{"a map", map[string]any{"maxTurns": 4, "command": "c", "env": map[string]any{"A": "b"}}, &agentOptions{}, "", 4},
		{"nothing: the defaults", nil, &agentOptions{MaxTurns: 2}, "", 2},
		{"a nil pointer: the defaults", (*agentOptions)(nil), &agentOptions{MaxTurns: 2}, "", 2},
		{"a typo in a map", map[string]any{"maxTurn": 4}, &agentOptions{}, "maxTurn: unknown option (known: command, env, fence, keyEnv, maxTurns, tools)", 0},
		{"a wrong type in a map", map[string]any{"tools": "a"}, &agentOptions{}, `tools: want a list, got the string "a"`, 0},
		{"invalid", &agentOptions{MaxTurns: -1}, &agentOptions{}, "maxTurns: must not be negative", 0},
		{"another backend's options", &scriptOptions{}, &agentOptions{}, "options of type *config_test.scriptOptions given to a backend whose options are *config_test.agentOptions", 0},
		{"options that are not a struct", map[string]any{"a": "b"}, &notAStruct{}, "cannot be read: the backend's options are a *config_test.notAStruct, not a pointer to a struct", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := backend.DecodeOptions(purser.BackendSpec{Options: tt.options}, tt.into)
			switch {
			case tt.want == "" && err != nil:
				t.Fatal(err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if o, ok := tt.into.(*agentOptions); ok && tt.want == "" && o.MaxTurns != tt.wantTurns {
				t.Fatalf("decoded %+v, want maxTurns %d", o, tt.wantTurns)
			}
		})
	}
}

// notAStruct is a backend author's mistake: options that are not a struct.
type notAStruct []string

func (notAStruct) Validate() error    { return nil }
func (notAStruct) Check(string) error { return nil }

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

// billing and unpricedModel are read on every backend type, beside type,
// models and callTimeout; left out, a backend bills per token and refuses
// unpriced models under a money cap only.
func TestBillingAndUnpricedModelAreCommonBackendKeys(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "s.yaml"), "steps: []\n")
	write(t, filepath.Join(dir, config.ProjectFileName), "backends:\n"+
		"  plan:\n    type: script\n    script: s.yaml\n    billing: subscription\n    unpricedModel: allow\n"+
		"  paid:\n    type: script\n    script: s.yaml\n")
	for _, tc := range []struct {
		backend      string
		subscription bool
		allow        bool
	}{{"plan", true, true}, {"paid", false, false}} {
		path := filepath.Join(dir, tc.backend+".yaml")
		write(t, path, "id: t\ngoal: g\nworkspace: ./ws\nvalidators: [{name: v, run: 'true'}]\n"+
			"budget: {hard: {usd: 1, tokens: 1000, maxIterations: 2}}\nbackend: "+tc.backend+"\n")
		task, _, err := config.Loader{Backends: fakeTypes()}.LoadTask(path)
		if err != nil {
			t.Fatal(err)
		}
		if task.Backend.Subscription() != tc.subscription || task.Backend.AllowUnpriced != tc.allow {
			t.Errorf("%s: subscription %v, allow unpriced %v; want %v, %v", tc.backend, task.Backend.Subscription(), task.Backend.AllowUnpriced, tc.subscription, tc.allow)
		}
		warning := config.SubscriptionWarning(task)
		if tc.subscription != (warning != "") || (warning != "" && !strings.Contains(warning, "not enforced")) {
			t.Errorf("%s: warning %q", tc.backend, warning)
		}
	}
}

// stallTimeout is a duration, or off: the stall window of the backend's
// calls (0, unset: the engine's default; negative: never).
func TestStallTimeoutOption(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{{"", 0}, {"  stallTimeout: 3s\n", 3 * time.Second}, {"  stallTimeout: off\n", -1}} {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "s.yaml"), "steps: []\n")
		if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "task.yaml")
		write(t, path, taskHead+"backend:\n  type: script\n  script: s.yaml\n"+tc.value)
		task, _, err := config.Loader{Backends: fakeTypes()}.LoadTask(path)
		if err != nil {
			t.Fatal(err)
		}
		if task.Backend.StallTimeout != tc.want {
			t.Errorf("%q: stall timeout %s, want %s", tc.value, task.Backend.StallTimeout, tc.want)
		}
	}
}
