package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Two repositories, two project databases, one team month in the budgets
// database — the user-level SQLite file by default, or a fleet's
// PostgreSQL named by PURSER_BUDGETS_DB — and two purser processes, one
// per repository, drawing from it at once, each in a run named "nightly"
// with a task "t". Their calls are held on the budget across both
// processes: its spend never passes its cap (each call is admitted only for
// what fits, and the sim keeps to what it was admitted for), both stop
// BLOCKED naming it, and its spend is exactly both projects' ledgers.
func TestTwoRepositoriesDrawFromOneBudgetsDatabase(t *testing.T) {
	onSQLiteAndPostgres(t, twoRepositoriesDrawFromOneBudget)
}

func twoRepositoriesDrawFromOneBudget(t *testing.T, dir, db string) {
	bin := buildPurser(t)
	const teamCap = 40_000
	env := append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(dir, ".state"), "PURSER_DB=", "PURSER_BUDGETS_DB=")
	if strings.Contains(db, "://") {
		env = append(env, "PURSER_BUDGETS_DB="+db)
	}
	files := map[string]string{}
	for _, repo := range []string{"repo-a", "repo-b"} {
		files[repo+"/purser.yaml"] = "durability: normal\n"
		files[repo+"/task.yaml"] = "id: t\ngoal: Keep trying.\nworkspace: ./ws\n" +
			"backend: {type: sim, script: sim.yaml, transcript: calls.jsonl}\n" +
			"validators: [{name: never, run: 'exit 1'}]\nbudget: {hard: {maxIterations: 1000}}\n"
		// Each call wants 6,000 output tokens; the sim keeps to the clamp.
		files[repo+"/sim.yaml"] = "steps:\n  - usage: {inputTokens: 10, outputTokens: 6000}\n    delayMs: 60\n"
		files[repo+"/ws/README"] = "x\n"
	}
	writeFiles(t, dir, files)
	purser := func(repo string, args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = filepath.Join(dir, repo), env
		return cmd
	}
	if out, err := purser("repo-a", "budgets", "create", "team", "--tokens", "40000", "--window", "month").CombinedOutput(); err != nil {
		t.Fatalf("budgets create: %v\n%s", err, out)
	}
	var runs []*exec.Cmd
	var outs []*strings.Builder
	for _, repo := range []string{"repo-a", "repo-b"} {
		cmd := purser(repo, "run", "--run", "nightly", "--draw-from", "team", "task.yaml")
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		runs, outs = append(runs, cmd), append(outs, out)
	}
	var total int64
	for i, repo := range []string{"repo-a", "repo-b"} {
		if code := exitCode(t, runs[i].Wait()); code != exitBudgetStop || !strings.Contains(outs[i].String(), "team") {
			t.Fatalf("%s exited %d, want %d, stopped by the named budget team:\n%s", repo, code, exitBudgetStop, outs[i])
		}
		used := repoTaskTokens(t, purser(repo, "status", "--json"))
		if want := transcriptTokens(t, filepath.Join(dir, repo, "calls.jsonl"), 10, 6000); used != want || used == 0 {
			t.Fatalf("%s: ledger %d tokens, transcript %d (want them equal, and some spent)", repo, used, want)
		}
		total += used
	}
	raw, err := purser("repo-b", "budgets", "show", "team", "--json").Output()
	if err != nil {
		t.Fatalf("budgets show: %v", err)
	}
	var shown []struct {
		SpentTokens int64    `json:"spentTokens"`
		Runs        []string `json:"runs"`
	}
	if err := json.Unmarshal(raw, &shown); err != nil || len(shown) != 1 {
		t.Fatalf("budgets show: %v %s", err, raw)
	}
	if shown[0].SpentTokens != total || len(shown[0].Runs) != 2 {
		t.Fatalf("team: spent %d tokens by runs %v; want both projects' ledgers, %d, by two runs", shown[0].SpentTokens, shown[0].Runs, total)
	}
	if total > teamCap {
		t.Fatalf("the two repositories spent %d tokens of a %d-token team budget", total, teamCap)
	}
	t.Logf("two repositories spent %d of the team's %d tokens", total, teamCap)
}

// repoTaskTokens is the tokens `purser status --json` says its one task used.
func repoTaskTokens(t *testing.T, status *exec.Cmd) int64 {
	t.Helper()
	raw, err := status.Output()
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	var got struct{ Tasks []sharedTask }
	if err := json.Unmarshal(raw, &got); err != nil || len(got.Tasks) != 1 {
		t.Fatalf("status: %v %s", err, raw)
	}
	return got.Tasks[0].Budget.UsedTokens
}

// A queue on a SQLite project database, its run drawing from a team budget
// in the user-level database: purser submit records the draw there (the
// database named relatively), the worker (naming it absolutely) admits and
// copies against it, and the budget's HARD cap stops the tasks past it,
// its spend exactly the one DONE task's.
func TestWorkerDrawsFromTheUserLevelBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs purser processes")
	}
	bin := buildPurser(t)
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, ".state"))
	t.Setenv("PURSER_BUDGETS_DB", "")
	tasks := namedQueueFiles(t, dir, false)
	if code, out := purserIn(t, bin, dir, "budgets", "create", "team", "--file", "team.yaml", "--window", "month", "--db", "q.db"); code != 0 {
		t.Fatalf("budgets create: exit %d\n%s", code, out)
	}
	args := append([]string{"submit", "--db", "q.db", "--run", "q", "--draw-from", "team"}, tasks...)
	if code, out := purserIn(t, bin, dir, args...); code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	if code, out := purserIn(t, bin, dir, "worker", "--db", filepath.Join(dir, "q.db"), "--concurrency", "2", "--poll", "100ms", "--drain"); code != 0 {
		t.Fatalf("worker: exit %d\n%s", code, out)
	}
	code, out := purserIn(t, bin, dir, "budgets", "show", "team", "--json", "--db", "q.db")
	if code != 0 {
		t.Fatalf("budgets show: exit %d\n%s", code, out)
	}
	var shown []struct {
		SpentTokens int64    `json:"spentTokens"`
		HeldTokens  int64    `json:"heldTokens"`
		Runs        []string `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil || len(shown) != 1 {
		t.Fatalf("budgets show: %v %s", err, out)
	}
	if got := shown[0]; got.SpentTokens != 900 || got.HeldTokens != 0 || len(got.Runs) != 1 || !strings.HasPrefix(got.Runs[0], "q@") {
		t.Fatalf("team: spent %d, held %d tokens, drawn on by %v; want 900, none, by run q (one run, however the database was named)", got.SpentTokens, got.HeldTokens, got.Runs)
	}
	_, status := purserIn(t, bin, dir, "status", "--db", "q.db")
	if strings.Count(status, "DONE") != 1 || strings.Count(status, "BLOCKED") != 2 {
		t.Fatalf("want 1 task DONE and 2 BLOCKED by team:\n%s", status)
	}
}
