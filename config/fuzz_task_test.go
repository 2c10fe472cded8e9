package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser/config"
)

// FuzzParseTask feeds arbitrary task files and purser.yaml files through the
// loaders: they return a task or an error naming the file, never panic.
func FuzzParseTask(f *testing.F) {
	f.Add([]byte("id: t\ngoal: g\nworkspace: .\nbackend: {type: script, script: s.yaml}\nvalidators: [{name: v, run: 'true', timeout: 5s}]\nbudget: {hard: {maxIterations: 2}}\ndegrade: {actions: [shrink_context, {action: switch_tier_cheap, at: warning}], shrinkContext: {maxTokens: 10}}\n"),
		[]byte("backends:\n  sim: {type: agent, maxTurns: 2, env: {A: b}, tools: [x], models: {cheap: a, standard: b}, callTimeout: 1m}\nbudget: {hard: {usd: 1, maxIterations: 3}}\nprices: {m: {input: 1, output: 2}}\n"))
	f.Add([]byte("id: [\n"), []byte("backends: 7"))
	f.Add([]byte("backend: sim\nvalidators: {}\n"), []byte("degrade: {actions: [nope]}"))
	f.Fuzz(func(t *testing.T, task, project []byte) {
		dir := t.TempDir()
		taskPath := filepath.Join(dir, "task.yaml")
		if err := os.WriteFile(taskPath, task, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, config.ProjectFileName), project, 0o644); err != nil {
			t.Fatal(err)
		}
		tk, _, err := config.Loader{Backends: fakeTypes()}.LoadTask(taskPath)
		if err != nil {
			return
		}
		if err := tk.Budget.Validate(); err != nil {
			t.Fatalf("a loaded task has an invalid budget: %v", err)
		}
	})
}
