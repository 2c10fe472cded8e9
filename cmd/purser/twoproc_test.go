package main

import (
	"bufio"
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

// Two purser processes share one database and one run budget, on SQLite
// and on PostgreSQL: no "database is locked", no lost rows, the shared token
// cap holds across them, and a database password never reaches the output.
func TestTwoProcessesShareARunBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two purser processes")
	}
	for _, store := range []struct {
		name string
		db   func(t *testing.T, dir string) string
	}{
		{"sqlite", func(t *testing.T, dir string) string { return filepath.Join(dir, "shared.db") }},
		{"postgres", func(t *testing.T, _ string) string { return pgtest.NewSchema(t) }},
	} {
		t.Run(store.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			twoProcessesShareARunBudget(t, dir, store.db(t, dir))
		})
	}
}

func twoProcessesShareARunBudget(t *testing.T, dir, db string) {
	bin := buildPurser(t)
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
	env := append(os.Environ(), "PURSER_DB="+db)
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
		out := outs[i].String()
		if strings.Contains(out, "database is locked") || strings.Contains(out, "SQLITE_BUSY") {
			t.Fatalf("process %d: %s", i, out)
		}
		if code != exitBudgetStop {
			t.Fatalf("process %d exited %d, want %d (stopped by the shared run budget):\n%s", i, code, exitBudgetStop, out)
		}
	}
	status := exec.Command(bin, "status", "--json", "--db", db)
	status.Dir = dir
	st, err := status.Output()
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if pw := password(t, db); pw != "" && (strings.Contains(string(st), pw) || strings.Contains(outs[0].String()+outs[1].String(), pw)) {
		t.Fatal("the database password appears in purser's output")
	}
	var got struct {
		Tasks []struct {
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
		// No lost rows: the ledger holds exactly what the sim says it used.
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
	t.Logf("two processes spent %d of %d tokens of their shared run budget (%s %d, %s %d)", total, runCap,
		got.Tasks[0].ID, got.Tasks[0].Budget.UsedTokens, got.Tasks[1].ID, got.Tasks[1].Budget.UsedTokens)
}

// password is a database URL's password, or "" for a file path.
func password(t *testing.T, db string) string {
	t.Helper()
	if !strings.Contains(db, "://") {
		return ""
	}
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	return pw
}

// transcriptTokens adds up what the sim used per completed call: its input,
// and its output clamped to the admitted maximum.
func transcriptTokens(t *testing.T, path string, input, output int64) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l struct {
			MaxOutput int64 `json:"maxOutputTokens"`
			Cancelled bool  `json:"cancelled"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		out := output
		if l.MaxOutput > 0 {
			out = min(out, l.MaxOutput)
		}
		sum += input + out
	}
	return sum
}
