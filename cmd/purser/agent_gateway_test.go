package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/config"
)

// Issue 21, any agent: `purser run` on a type: agent backend — a small
// agent no part of Purser knows, given only a base URL and a key — against
// the shared mock. Its two requests (the task, and a side request of its
// own) are booked from the door exactly, the task is DONE; with sandbox:
// on the door is its only way out (the provider's own address is not
// reached from the box), and the result is the same.
func TestRunBudgetsAnyAgentThroughTheDoor(t *testing.T) {
	mock := backendtest.StartMock(t)
	script, err := filepath.Abs("../../backend/agent/testdata/agent.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"off", "on"} {
		t.Run("sandbox "+mode, func(t *testing.T) {
			if mode == "on" {
				requireBox(t)
			}
			dir := t.TempDir()
			unboxWhereNoBox(t, dir) // the validator: boxed by default
			t.Setenv("XDG_STATE_HOME", filepath.Join(dir, ".state"))
			t.Setenv("PURSER_TEST_REAL_KEY", "sk-ant-real-key-for-the-door-test")
			if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
				t.Fatal(err)
			}
			agentPath := filepath.Join(dir, "agent.py")
			b, err := os.ReadFile(script)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(agentPath, b, 0o755); err != nil {
				t.Fatal(err)
			}
			task := fmt.Sprintf(`id: door
goal: write it MOCK_TOOL
workspace: ./ws
backend:
  type: agent
  wire: anthropic
  command: [%q, "{prompt}"]
  model: claude-sonnet-4-5
  models: {standard: claude-sonnet-4-5}
  upstream: %s
  key: {env: PURSER_TEST_REAL_KEY}
  sandbox: %s
  env: {AGENT_TRY_DIRECT: %s}
validators:
  - {name: t, run: "true"}
budget:
  hard: {maxIterations: 1, tokens: 100000}
`, agentPath, mock, mode, mock)
			if err := os.WriteFile(filepath.Join(dir, "task.yaml"), []byte(task), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"run", filepath.Join(dir, "task.yaml")}, &stdout, &stderr)
			if code != 0 {
				t.Fatalf("purser run: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
			}
			stdout.Reset()
			db := config.DefaultDatabase(dir)
			if code := run(context.Background(), []string{"status", "--json", "--db", db}, &stdout, &stderr); code != 0 {
				t.Fatalf("status: exit %d %s", code, stderr.String())
			}
			var got struct{ Tasks []sharedTask }
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || len(got.Tasks) != 1 {
				t.Fatalf("status: %v %s", err, stdout.String())
			}
			// The tool call (5500 in, 60 out) and the side call (50 in, 3
			// out), as the mock's README fixes them.
			if tk := got.Tasks[0]; tk.Status != "DONE" || tk.Budget.UsedTokens != 5500+60+50+3 {
				t.Errorf("task %+v; want DONE with 5613 tokens", tk)
			}
			// Around the door: reached unboxed (what the box closes), never
			// from the box.
			_, err = os.Stat(filepath.Join(dir, "ws", "direct.txt"))
			if reached := err == nil; reached != (mode == "off") {
				t.Errorf("sandbox %s: the agent reached the provider around the door: %v", mode, reached)
			}
			if strings.Contains(stderr.String(), "sk-ant-real-key") {
				t.Error("the real key was printed")
			}
		})
	}
}
