package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/config"
)

// degradeOf writes a project (purser.yaml holding project, when not empty)
// and a task file ending in extra, and loads the task's degrade policy.
func degradeOf(t *testing.T, project, extra string) (purser.DegradePolicy, error) {
	t.Helper()
	dir := t.TempDir()
	if project != "" {
		if err := os.WriteFile(filepath.Join(dir, "purser.yaml"), []byte(project), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	task := "id: t1\ngoal: Fix it.\nworkspace: ./ws\nbackend: {type: sim, script: sim.yaml}\n" +
		"validators: [{name: ok, run: 'true'}]\nbudget: {hard: {maxIterations: 3}}\n" + extra
	path := filepath.Join(dir, "task.yaml")
	if err := os.WriteFile(path, []byte(task), 0o600); err != nil {
		t.Fatal(err)
	}
	got, _, err := config.Loader{}.LoadTask(path)
	return got.Degrade, err
}

// budgetHint: and wrapUp: are opt-in options of the degrade policy, in the
// task file or purser.yaml; a value that is not a boolean is an error
// naming the file, line and field.
func TestDegradeBudgetHintAndWrapUpOptIn(t *testing.T) {
	for _, tc := range []struct {
		name, project, extra string
		hint, wrapUp         bool
		wantErr              string
	}{
		{"off by default", "", "", false, false, ""},
		{"the task's", "", "degrade: {budgetHint: true, wrapUp: true}\n", true, true, ""},
		{"the project's", "degrade: {budgetHint: true}\n", "", true, false, ""},
		{"a bad value", "", "degrade:\n  budgetHint: maybe\n", false, false, "task.yaml:8:15"},
		{"a misspelt key", "", "degrade: {budgetHints: true}\n", false, false, "budgetHints"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := degradeOf(t, tc.project, tc.extra)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.BudgetHint != tc.hint || got.WrapUp != tc.wrapUp {
				t.Fatalf("budgetHint %t wrapUp %t, want %t %t", got.BudgetHint, got.WrapUp, tc.hint, tc.wrapUp)
			}
		})
	}
}
