package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/config"
)

// subAgentsTask loads a task file ending in extra, beside a purser.yaml
// holding project when not empty.
func subAgentsTask(t *testing.T, project, extra string) (purser.SubAgentLimits, error) {
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
	return got.SubAgents, err
}

// subAgents: caps the spawns and each sub-agent's spend, in the task file
// or purser.yaml (the task's wins whole); each problem is refused with the
// file, line and field, and an unknown key by name.
func TestTaskSubAgents(t *testing.T) {
	for _, tc := range []struct {
		name, project, extra string
		want                 string // maxSpawn/usd/tokens, "-" for unset
		wantErr              string
	}{
		{"none", "", "", "-/-/-", ""},
		{"the issue's", "", "subAgents: {maxSpawn: 8, each: {usd: 0.50, tokens: 200000}}\n", "8/$0.50/200000", ""},
		{"no spawn at all", "", "subAgents: {maxSpawn: 0}\n", "0/-/-", ""},
		{"each alone", "", "subAgents:\n  each: {tokens: 5000}\n", "-/-/5000", ""},
		{"the project's", "subAgents: {maxSpawn: 3}\n", "", "3/-/-", ""},
		{"the task's over the project's", "subAgents: {maxSpawn: 3}\n", "subAgents: {each: {usd: 1}}\n", "-/$1.00/-", ""},
		{"a negative count", "", "subAgents: {maxSpawn: -1}\n", "", "task.yaml:7:23: subAgents.maxSpawn: -1: want 0 or more"},
		{"a zero cap", "", "subAgents:\n  each: {usd: 0}\n", "", "task.yaml:8:15: subAgents.each.usd: $0.00: want more than $0"},
		{"negative tokens", "", "subAgents: {each: {tokens: -5}}\n", "", "task.yaml:7:28: subAgents.each.tokens: -5: want more than 0"},
		{"an empty each", "", "subAgents: {each: {}}\n", "", "subAgents.each: caps nothing"},
		{"nothing capped", "", "subAgents: {}\n", "", "subAgents: caps nothing"},
		{"an unknown key", "", "subAgents: {maxSpawns: 3}\n", "", "maxSpawns"},
		{"a bad one in purser.yaml", "subAgents: {maxSpawn: -2}\n", "", "", "purser.yaml:1:23: subAgents.maxSpawn: -2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := subAgentsTask(t, tc.project, tc.extra)
			if tc.wantErr != "" {
				var ce *config.Error
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &ce) {
					t.Fatalf("error %v, want a *config.Error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := []string{"-", "-", "-"}
			if got.MaxSpawn != nil {
				s[0] = itoa(*got.MaxSpawn)
			}
			if got.Each.USD != nil {
				s[1] = got.Each.USD.String()
			}
			if got.Each.Tokens != nil {
				s[2] = itoa(int(*got.Each.Tokens))
			}
			if g := strings.Join(s, "/"); g != tc.want {
				t.Errorf("subAgents %s, want %s", g, tc.want)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
