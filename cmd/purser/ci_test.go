package main

import (
	"os"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// A task's reason comes from agents and backends: in the job summary it
// stays in its cell, and in an annotation it cannot start a workflow command
// of its own or carry a secret.
func TestGitHubReportKeepsAgentTextInItsPlace(t *testing.T) {
	secret := "ghp_" + strings.Repeat("x1Y2", 9)
	reason := "budget exhausted | forged cell\n::add-mask::" + secret + "\n::error::forged"
	hard := budget.USD(1_000_000_000)
	iters := 3
	cfg := budget.Config{Hard: budget.HardLimits{USD: &hard, MaxIterations: &iters}}
	tasks := []ciTask{{
		rec:    purser.TaskRecord{ID: "t1", State: purser.StateBlocked, Reason: reason, Budget: cfg},
		status: budget.Status{Tier: budget.Hard, Cause: budget.Money, UsedUSD: hard, UsedIterations: 2},
	}}
	var stdout, summary strings.Builder
	if err := githubReport(&stdout, &summary, tasks); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "::error title=Purser%3A t1 BLOCKED::") {
		t.Fatalf("want one ::error line, got %q", stdout.String())
	}
	if !strings.Contains(lines[0], "%0A::add-mask::") || strings.Contains(stdout.String(), secret) {
		t.Fatalf("the annotation lets the reason start a command or shows the secret: %q", lines[0])
	}
	var row string
	for _, l := range strings.Split(summary.String(), "\n") {
		if strings.HasPrefix(l, "| t1 |") {
			row = l
		}
	}
	if strings.Count(row, " | ") != 7 || !strings.Contains(row, `budget exhausted \| forged cell`) || strings.Contains(summary.String(), secret) {
		t.Fatalf("the summary row is broken by the reason or shows the secret:\n%s", summary.String())
	}
	if !strings.Contains(row, "| $1.00 (reported) / $1.00 |") || !strings.Contains(row, "| 2 / 3 |") {
		t.Fatalf("row = %s", row)
	}
}

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
