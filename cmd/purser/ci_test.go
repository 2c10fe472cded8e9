package main

import (
	"os"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// The action's definition: a composite action whose steps run the script
// the tests run, passing it every input the script reads.
func TestActionDefinition(t *testing.T) {
	data, err := os.ReadFile(mustAbs("../../action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var action struct {
		Inputs map[string]struct {
			Required bool `yaml:"required"`
		} `yaml:"inputs"`
		Runs struct {
			Using string `yaml:"using"`
			Steps []struct {
				Run  string            `yaml:"run"`
				Uses string            `yaml:"uses"`
				Env  map[string]string `yaml:"env"`
			} `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal(data, &action); err != nil {
		t.Fatal(err)
	}
	if action.Runs.Using != "composite" || !action.Inputs["tasks"].Required {
		t.Fatalf("action.yml: using %q, tasks required %v", action.Runs.Using, action.Inputs["tasks"].Required)
	}
	script, err := os.ReadFile(mustAbs("../../action/run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var ran, installed bool
	for _, s := range action.Runs.Steps {
		if strings.Contains(s.Run, "go install ./cmd/purser") {
			installed = true
		}
		if !strings.Contains(s.Run, `"$GITHUB_ACTION_PATH/action/run.sh"`) {
			continue
		}
		ran = true
		for name := range action.Inputs {
			if name == "working-directory" || name == "install-go" {
				continue // used by the steps themselves
			}
			v := "INPUT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
			if s.Env[v] != "${{ inputs."+name+" }}" || !strings.Contains(string(script), v) {
				t.Errorf("input %s does not reach run.sh as %s", name, v)
			}
		}
	}
	if !ran || !installed {
		t.Fatalf("action.yml: installs purser %v, runs action/run.sh %v", installed, ran)
	}
}
