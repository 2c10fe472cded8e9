package main

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser/postgres/pgtest"
)

// Two purser processes share one PostgreSQL database and one run budget
// (the sim backend): the shared token cap holds across them, and the ledger
// holds exactly what the sim says each used.
func TestTwoProcessesShareARunBudgetInPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two purser processes")
	}
	dbURL := pgtest.NewSchema(t)
	bin := buildPurser(t)
	dir := t.TempDir()
	const runCap = 40_000
	files := map[string]string{
		"run.yaml": "hard: {tokens: 40000, maxIterations: 10000}\n",
		// Each call wants 6,000 output tokens; the sim honours the clamp.
		"sim.yaml": "steps:\n  - usage: {inputTokens: 10, outputTokens: 6000}\n    delayMs: 60\n",
	}
	for _, name := range []string{"a", "b"} {
		files[name+".yaml"] = "id: " + name + "\ngoal: Keep trying.\nworkspace: ./ws-" + name + "\n" +
			"backend: {type: sim, script: sim.yaml, transcript: " + name + ".calls.jsonl}\n" +
			"validators: [{name: never, run: 'exit 1'}]\nbudget: {hard: {maxIterations: 1000}}\n"
		files["ws-"+name+"/README"] = "x\n"
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "PURSER_DB="+dbURL)
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for _, name := range []string{"a", "b"} {
		cmd := exec.Command(bin, "run", "--run", "shared", "--run-budget", "run.yaml", name+".yaml")
		cmd.Dir, cmd.Env = dir, env
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		code := exitCode(t, cmd.Wait())
		if code != exitBudgetStop {
			t.Fatalf("process %d exited %d, want %d (stopped by the shared run budget):\n%s", i, code, exitBudgetStop, outs[i])
		}
	}
	status := exec.Command(bin, "status", "--json", "--db", dbURL)
	status.Dir = dir
	st, err := status.Output()
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if pw := passwordIn(t, dbURL); pw != "" && (strings.Contains(string(st), pw) || strings.Contains(outs[0].String()+outs[1].String(), pw)) {
		t.Fatal("the database password appears in purser's output")
	}
	var got struct {
		Database string
		Tasks    []struct {
			ID     string
			Budget struct {
				UsedTokens int64 `json:"usedTokens"`
			}
		}
	}
	if err := json.Unmarshal(st, &got); err != nil || len(got.Tasks) != 2 {
		t.Fatalf("status: %v %s", err, st)
	}
	var total int64
	for _, task := range got.Tasks {
		total += task.Budget.UsedTokens
		if want := transcriptTokens(t, filepath.Join(dir, task.ID+".calls.jsonl"), 10, 6000); task.Budget.UsedTokens != want {
			t.Errorf("task %s: ledger %d tokens, transcript %d", task.ID, task.Budget.UsedTokens, want)
		}
		if task.Budget.UsedTokens == 0 {
			t.Errorf("task %s never ran: the test shows no contention", task.ID)
		}
	}
	if total > runCap {
		t.Fatalf("the two processes spent %d tokens of a %d-token shared run budget", total, runCap)
	}
	t.Logf("two processes on PostgreSQL spent %d of %d tokens of their shared run budget (%s %d, %s %d)", total, runCap,
		got.Tasks[0].ID, got.Tasks[0].Budget.UsedTokens, got.Tasks[1].ID, got.Tasks[1].Budget.UsedTokens)
}

func passwordIn(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	return pw
}
