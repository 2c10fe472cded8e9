package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/postgres"
	"github.com/purser-dev/purser/postgres/pgtest"
)

// namedQueueFiles writes three tasks (n0, n1, n2) each spending 900 tokens
// in one call, a named budget of 1,000 tokens, and a task file naming a
// budget nobody created. With drawFrom set, every task file says
// drawFrom: [team].
func namedQueueFiles(t *testing.T, dir string, drawFrom bool) []string {
	t.Helper()
	files := map[string]string{
		"team.yaml":   "hard: {tokens: 1000}\n",
		"sim.yaml":    "steps:\n  - usage: {inputTokens: 800, outputTokens: 100}\n    files: {done: \"yes\"}\n",
		"stray.yaml":  "id: stray\ngoal: Pass.\nworkspace: ./ws-stray\nbackend: {type: sim, script: sim.yaml}\nvalidators: [{name: ok, run: 'test -f done'}]\nbudget: {hard: {maxIterations: 3}}\ndrawFrom: [nope]\n",
		"ws-stray/.k": "",
	}
	var tasks []string
	for i := range 3 {
		id := fmt.Sprintf("n%d", i)
		body := "id: " + id + "\ngoal: Pass.\nworkspace: ./ws-" + id + "\nbackend: {type: sim, script: sim.yaml, transcript: " + id + ".calls.jsonl}\n" +
			"validators: [{name: ok, run: 'test -f done'}]\nbudget: {hard: {maxIterations: 3}}\n"
		if drawFrom {
			body += "drawFrom: [team]\n"
		}
		files[id+".yaml"] = body
		files["ws-"+id+"/.k"] = ""
		tasks = append(tasks, id+".yaml")
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	unboxWhereNoBox(t, dir)
	return tasks
}

// purserIn runs the purser binary in dir and returns its exit code and
// combined output.
func purserIn(t *testing.T, bin, dir string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PURSER_DB=")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("purser %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return 0, string(out)
}

// Tasks run by purser worker draw from the named budgets their run draws
// from — by purser submit --draw-from, or by the task file's drawFrom: —
// exactly as purser run --draw-from: the budget's HARD cap (1,000 tokens;
// the three tasks would spend 2,700) refuses the calls past it, each such
// task stopping BLOCKED naming the budget, and the budget's spend stays
// under its cap. A budget nobody created is refused at submit, by name,
// with nothing queued.
func TestWorkerHonoursNamedBudgets(t *testing.T) {
	bin := buildPurser(t)
	for _, tc := range []struct {
		name     string
		drawFrom bool     // the task files say drawFrom: [team]
		flags    []string // purser submit's
	}{
		{"submit --draw-from", false, []string{"--draw-from", "team"}},
		{"drawFrom: in the task files", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := pgtest.NewSchema(t)
			dir := t.TempDir()
			tasks := namedQueueFiles(t, dir, tc.drawFrom)
			if code, out := purserIn(t, bin, dir, "budgets", "create", "team", "--file", "team.yaml", "--window", "month", "--db", db); code != 0 {
				t.Fatalf("budgets create: exit %d\n%s", code, out)
			}
			// An unknown budget, by flag or in a task file: bad input naming it, nothing queued.
			for _, args := range [][]string{
				append([]string{"submit", "--db", db, "--run", "q", "--draw-from", "team,nope"}, tasks...),
				{"submit", "--db", db, "--run", "q", "stray.yaml"},
			} {
				if code, out := purserIn(t, bin, dir, args...); code != exitBadInput || !strings.Contains(out, `no named budget "nope"`) {
					t.Fatalf("purser %s: exit %d, want %d naming the budget nope:\n%s", strings.Join(args, " "), code, exitBadInput, out)
				}
			}
			ctx := context.Background()
			s, err := postgres.OpenExisting(ctx, db)
			must(t, err)
			defer s.Close()
			if jobs, err := s.Jobs(ctx, ""); err != nil || len(jobs) != 0 {
				t.Fatalf("%d jobs queued by refused submits (%v), want none", len(jobs), err)
			}

			args := append(append([]string{"submit", "--db", db, "--run", "q"}, tc.flags...), tasks...)
			if code, out := purserIn(t, bin, dir, args...); code != 0 {
				t.Fatalf("submit: exit %d\n%s", code, out)
			}
			if code, out := purserIn(t, bin, dir, "worker", "--db", db, "--concurrency", "2", "--poll", "100ms", "--drain"); code != 0 {
				t.Fatalf("worker: exit %d\n%s", code, out)
			}

			done, blocked := 0, 0
			for _, f := range tasks {
				rec, err := s.Task(ctx, strings.TrimSuffix(f, ".yaml"))
				must(t, err)
				switch {
				case rec.State == purser.StateDone:
					done++
				case rec.State == purser.StateBlocked && strings.Contains(rec.Reason, `budget "team"`):
					blocked++
				default:
					t.Errorf("task %s ended %s (%q), want DONE or BLOCKED by the named budget team", rec.ID, rec.State, rec.Reason)
				}
			}
			st, err := s.NamedBudgetStatus(ctx, "team", time.Now())
			must(t, err)
			if done != 1 || blocked != 2 {
				t.Fatalf("%d DONE, %d BLOCKED by team; want 1 and 2 (a 1,000-token budget, 900 tokens a task)", done, blocked)
			}
			if st.Spent.Tokens != 900 || len(st.Runs) != 1 || st.Runs[0] != "q" {
				t.Fatalf("team spent %d tokens, drawn on by %v; want 900, by run q", st.Spent.Tokens, st.Runs)
			}
			if st.Held.Tokens != 0 {
				t.Fatalf("%d tokens still held on team after the workers finished", st.Held.Tokens)
			}
		})
	}
}
