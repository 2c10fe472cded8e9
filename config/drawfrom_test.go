package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/purser-dev/purser/config"
)

// drawFromTask writes a project (purser.yaml holding project, when not
// empty) and a task file ending in extra, and loads the task.
func drawFromTask(t *testing.T, project, extra string) ([]string, error) {
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
	return got.DrawFrom, err
}

// A task draws from the named budgets its file's drawFrom: lists and those
// its purser.yaml lists (a task cannot opt out of its project's); a bad
// list is an error naming the file, the line and the entry.
func TestTaskDrawFrom(t *testing.T) {
	for _, tc := range []struct {
		name, project, extra string
		want                 []string
		wantErr              string
	}{
		{"none", "", "", nil, ""},
		{"the task's", "", "drawFrom: [team, repo]\n", []string{"repo", "team"}, ""},
		{"the project's", "drawFrom: [team]\n", "", []string{"team"}, ""},
		{"both, each once", "drawFrom: [team]\n", "drawFrom: [repo, team]\n", []string{"repo", "team"}, ""},
		{"a bad name", "", "drawFrom: [team, 'a b']\n", nil, `task.yaml:7:18: drawFrom[1]: want the name of a named budget`},
		{"a name twice", "", "drawFrom:\n  - team\n  - team\n", nil, `task.yaml:9:5: drawFrom[1]: "team" is listed twice`},
		{"an empty name", "", "drawFrom: ['']\n", nil, "drawFrom[0]: want the name of a named budget (purser budgets create): name: must not be empty"},
		{"not a list", "", "drawFrom: team\n", nil, "task.yaml:7:"},
		{"a bad name in purser.yaml", "drawFrom: [ok, 'no/slash']\n", "", nil, `purser.yaml:1:16: drawFrom[1]: want the name of a named budget`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := drawFromTask(t, tc.project, tc.extra)
			if tc.wantErr == "" {
				if err != nil || !slices.Equal(got, tc.want) {
					t.Fatalf("drawFrom %q (%v), want %q", got, err, tc.want)
				}
				return
			}
			var ce *config.Error
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &ce) {
				t.Fatalf("error %v, want a *config.Error containing %q", err, tc.wantErr)
			}
		})
	}
}
