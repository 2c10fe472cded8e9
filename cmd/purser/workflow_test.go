package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// workflowStep is a GitHub Actions step, as far as the token checks read it.
type workflowStep struct {
	Uses string            `yaml:"uses"`
	Run  string            `yaml:"run"`
	With map[string]any    `yaml:"with"`
	Env  map[string]string `yaml:"env"`
}

// gitPush is a git push command line, options before push included.
var gitPush = regexp.MustCompile(`(?m)^\s*git\b.*\bpush\b`)

// mentionsToken says whether text hands the job's token on.
func mentionsToken(text string) bool {
	return strings.Contains(text, "secrets.GITHUB_TOKEN") || strings.Contains(text, "github.token")
}

// Issue 20 item 7: the example workflow never leaves a write token where
// the agent works. Every checkout keeps no credentials (persist-credentials:
// false); the job that runs the agent (uses purser's action) can only read
// the repository and passes no token to any step; the push is in another
// job, after it.
func TestWorkflowKeepsTokenFromAgent(t *testing.T) {
	data, err := os.ReadFile(mustAbs("../../examples/github/agent-on-issue.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Permissions map[string]string `yaml:"permissions"`
		Jobs        map[string]struct {
			Needs       any               `yaml:"needs"`
			Permissions map[string]string `yaml:"permissions"`
			Steps       []workflowStep    `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatal(err)
	}
	if wf.Permissions["contents"] == "write" {
		t.Errorf("the workflow grants contents: write to every job, the agent's included")
	}
	var agentJobs, pushJobs []string
	for name, job := range wf.Jobs {
		runsAgent, pushes := false, false
		for i, s := range job.Steps {
			if strings.HasPrefix(s.Uses, "actions/checkout@") {
				if v, ok := s.With["persist-credentials"]; !ok || v != false {
					t.Errorf("job %s step %d: actions/checkout without persist-credentials: false leaves the token in .git/config", name, i)
				}
			}
			if strings.HasPrefix(s.Uses, "purser-dev/purser@") || strings.Contains(s.Run, "purser run") {
				runsAgent = true
			}
			if gitPush.MatchString(s.Run) {
				pushes = true
			}
		}
		if runsAgent {
			agentJobs = append(agentJobs, name)
			if job.Permissions["contents"] != "read" {
				t.Errorf("job %s runs the agent with contents: %q; want read", name, job.Permissions["contents"])
			}
			for i, s := range job.Steps {
				b, _ := yaml.Marshal(s)
				if mentionsToken(string(b)) {
					t.Errorf("job %s runs the agent and its step %d is given the job's token", name, i)
				}
				if gitPush.MatchString(s.Run) {
					t.Errorf("job %s runs the agent and pushes (step %d): the push must be a job the agent never ran in", name, i)
				}
			}
		}
		if pushes {
			pushJobs = append(pushJobs, name)
		}
	}
	if len(agentJobs) != 1 || len(pushJobs) != 1 || agentJobs[0] == pushJobs[0] {
		t.Fatalf("want one job running the agent and another pushing: agent %v, push %v", agentJobs, pushJobs)
	}
	if needs, _ := yaml.Marshal(wf.Jobs[pushJobs[0]].Needs); !strings.Contains(string(needs), agentJobs[0]) {
		t.Errorf("job %s pushes without waiting for %s", pushJobs[0], agentJobs[0])
	}
}

// The action's script refuses to start the agent in a repository whose
// .git/config holds a token (a checkout without persist-credentials: false).
func TestActionRefusesTokenInWorkspace(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, c := range []struct {
		name, key, value string
		want             int
	}{
		{"extraheader", "http.https://github.com/.extraheader", "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46c2VjcmV0", 2},
		{"url password", "remote.origin.url", "https://x-access-token:secret@github.com/o/r.git", 2},
		{"clean", "remote.origin.url", "https://github.com/o/r.git", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, args := range [][]string{{"init", "-q"}, {"config", c.key, c.value}} {
				cmd := exec.Command("git", args...)
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			fake := filepath.Join(dir, "fake-purser")
			if err := os.WriteFile(fake, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", mustAbs("../../action/run.sh"))
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PURSER="+fake, "INPUT_TASKS=task.yaml", "RUNNER_TEMP="+dir, "GITHUB_OUTPUT=")
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.want {
				t.Fatalf("run.sh exit %d, want %d\n%s", code, c.want, out)
			}
			if c.want == 2 && (!strings.Contains(string(out), "persist-credentials: false") || strings.Contains(string(out), "secret")) {
				t.Fatalf("run.sh said:\n%s", out)
			}
		})
	}
}
