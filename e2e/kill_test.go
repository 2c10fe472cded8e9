package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/backend/codex"
	"github.com/purser-dev/purser/backend/gemini"
	"github.com/purser-dev/purser/sqlite"
)

// killCLI is one real CLI set up for the kill -9 trials.
type killCLI struct {
	name string
	// setup writes the CLI's settings under home and returns the backend
	// mapping of the task file and the environment purser needs.
	setup func(t *testing.T, dir, home, url string) (backend string, env []string)
	// tokens are what the mock delivers per reply kind (the README's fixed
	// usage numbers, as the CLI counts them).
	tokens map[string]int64
	// started is what the CLI books of a reply from its start alone, per
	// reply kind: the input its provider reports before the reply is
	// whole (Claude's message_start; issue 22 item 10), billed even when
	// the reply is cut.
	started map[string]int64
	// backend builds the CLI's backend as the trial configured it, to read
	// what its session files hold.
	backend func(dir, home string) (purser.SpendRecoverer, error)
}

var killCLIs = []killCLI{
	{name: "claude", backend: func(dir, home string) (purser.SpendRecoverer, error) {
		return claude.New(cliSpec("claude", dir, "HOME", home))
	}, tokens: map[string]int64{"tool": 5560, "final": 5905, "side": 53}, started: map[string]int64{"tool": 5501, "final": 5901},
		setup: claudeAgainstMock},
	{name: "codex", backend: func(dir, home string) (purser.SpendRecoverer, error) {
		return codex.New(cliSpec("codex", dir, "CODEX_HOME", home))
	}, tokens: map[string]int64{"tool": 5260, "final": 5805, "side": 53},
		setup: codexAgainstMock},
	{name: "gemini", backend: func(dir, home string) (purser.SpendRecoverer, error) {
		return gemini.New(cliSpec("gemini", dir, "HOME", home))
	}, tokens: map[string]int64{"tool": 5280, "final": 5805, "side": 53},
		setup: geminiAgainstMock},
}

// Issue 11, item 1: `kill -9` of purser while a real CLI is mid-call leaves
// no agent process alive 2 s later, and after `purser resume` the ledger
// equals what the mock delivered (replies written whole to a client that was
// still there). The kill lands at a seeded random moment 0-4 s after the
// agent's start (its start-up, its first model call) or after the first
// reply the mock delivered (the tool run, the second model call, which the
// mock holds 3 s). PURSER_KILL_TRIALS trials per
// CLI (2 by default, so CI stays fast).
func TestKill9MidCall(t *testing.T) {
	dir := clis(t)
	trials := 2
	if s := os.Getenv("PURSER_KILL_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("PURSER_KILL_TRIALS=%q: want a positive number", s)
		}
		trials = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PURSER_KILL_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("PURSER_KILL_SEED=%q: want a number", s)
		}
		seed = n
	}
	t.Logf("seed %d (PURSER_KILL_SEED repeats it)", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	url := backendtest.StartMock(t)
	for _, c := range killCLIs {
		t.Run(c.name, func(t *testing.T) {
			var worst time.Duration
			for i := range trials {
				// Half the kills are timed from the agent's start (its start-up
				// and first model call), half from the first reply the mock
				// delivered (the tool run, and the second call held 3 s).
				afterReply := rng.IntN(2) == 1
				delay := time.Duration(rng.IntN(4000)) * time.Millisecond
				if gone := killTrial(t, c, dir, url, i, afterReply, delay); gone > worst {
					worst = gone
				}
			}
			t.Logf("%s: %d trials, every agent process gone at most %s after the kill", c.name, trials, worst.Round(time.Millisecond))
		})
	}
}

// killTrial runs one trial and returns how long after the kill the last
// agent process was seen gone.
func killTrial(t *testing.T, c killCLI, cliDir, url string, trial int, afterReply bool, killAfter time.Duration) time.Duration {
	base := t.TempDir()
	ws, home := filepath.Join(base, "ws"), filepath.Join(base, "home")
	for _, d := range []string{ws, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	backend, env := c.setup(t, cliDir, home, url)
	id := fmt.Sprintf("kill-%s-%d", c.name, trial)
	task := fmt.Sprintf("id: %s\ngoal: %q\nworkspace: ./ws\nbackend:\n%s\nvalidators:\n  - name: file\n    run: test -f mock_out.txt\nbudget:\n  hard: {usd: 1.0, maxIterations: 3}\n",
		id, "Create mock_out.txt. MOCK_TOOL MOCK_SLOWAFTER_3", backend)
	if err := os.WriteFile(filepath.Join(base, "task.yaml"), []byte(task), 0o644); err != nil {
		t.Fatal(err)
	}
	unboxedProject(t, base)
	if resp, err := http.Post(url+"/_mock/reset", "application/json", nil); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	db := filepath.Join(base, "purser.db")
	env = append(append(os.Environ(), env...), "PURSER_DB="+db, "XDG_STATE_HOME="+filepath.Join(base, "state"))
	run := exec.Command(buildPurser(t), "run", "task.yaml")
	run.Dir, run.Env = base, env
	var out bytes.Buffer
	run.Stdout, run.Stderr = &out, &out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	// The kill is timed from the agent's start.
	deadline := time.Now().Add(60 * time.Second)
	for len(agentProcesses(home, ws)) == 0 {
		if time.Now().After(deadline) {
			_ = run.Process.Kill()
			_ = run.Wait()
			t.Fatalf("trial %d: no agent started within 60 s\n%s", trial, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	anchor := "the agent started"
	if afterReply {
		anchor = "the first reply"
		for {
			if n, _ := mockDelivered(t, url, c.tokens); n > 0 {
				break
			}
			if time.Now().After(deadline) {
				_ = run.Process.Kill()
				_ = run.Wait()
				t.Fatalf("trial %d: no reply delivered within 60 s\n%s", trial, out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(killAfter)
	if err := run.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	_ = run.Wait()

	// The point of the test: 2 s after the kill, no agent process runs.
	var left []string
	for {
		left = agentProcesses(home, ws)
		if len(left) == 0 || time.Since(killedAt) > 2*time.Second {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	gone := time.Since(killedAt)
	if len(left) > 0 {
		killAgents(home, ws)
		t.Fatalf("trial %d (kill %s after %s): agent processes alive 2 s after purser's SIGKILL:\n%s",
			trial, killAfter, anchor, strings.Join(left, "\n"))
	}

	res := exec.Command(buildPurser(t), "resume", id)
	res.Dir, res.Env = base, env
	resOut, err := res.CombinedOutput()
	if err != nil && strings.Contains(string(resOut), "no task") {
		// Killed before the task was recorded: it is simply run again.
		res = exec.Command(buildPurser(t), "run", "task.yaml")
		res.Dir, res.Env = base, env
		resOut, err = res.CombinedOutput()
	}
	if err != nil {
		t.Fatalf("trial %d: resume: %v\n%s", trial, err, resOut)
	}
	st, err := exec.Command(buildPurser(t), "status", id, "--json", "--db", db).Output()
	if err != nil {
		t.Fatal(err)
	}
	var status struct{ Tasks []taskStatus }
	if err := json.Unmarshal(st, &status); err != nil || len(status.Tasks) != 1 {
		t.Fatalf("status: %v %s", err, st)
	}
	delivered, replies := mockDelivered(t, url, c.tokens)
	got := status.Tasks[0]
	// What Purser must hold: the task DONE, never more than the mock
	// delivered, and never less than the CLI itself wrote down in its session
	// files (what a resume can recover). A reply the CLI received but died
	// before reading or writing down is recorded nowhere on this machine;
	// PURSER_KILL_STRICT=1 (the 30-trial measurement of docs/reliability.md)
	// counts that as a failure too, to say how often it happens.
	onFile := cliRecorded(t, c, cliDir, home, ws, db, id)
	// A reply the mock began to a client then gone was billed for what its
	// start reported, and may be booked for it (issue 22, item 10).
	cut := mockCutStarts(t, url, c.started)
	if got.Status != "DONE" || got.Budget.UsedTokens > delivered+cut || got.Budget.UsedTokens < onFile ||
		(os.Getenv("PURSER_KILL_STRICT") == "1" && got.Budget.UsedTokens != delivered) {
		// Not fatal: the remaining trials still run, so a failing run says
		// how often, not only that.
		t.Errorf("trial %d (kill %s after %s): after resume %s with %d tokens in the ledger; the CLI's session files hold %d; the mock delivered %d (%s)\n%s\ncalls:\n%s",
			trial, killAfter, anchor, got.Status, got.Budget.UsedTokens, onFile, delivered, replies, resOut, callsOf(t, db, id))
		return gone
	}
	if got.Budget.UsedTokens < delivered {
		t.Logf("trial %d (kill %s after %s): the CLI died holding %d tokens of a reply the mock delivered and it never wrote down (ledger %d = its session files %d; delivered %d: %s)",
			trial, killAfter, anchor, delivered-got.Budget.UsedTokens, got.Budget.UsedTokens, onFile, delivered, replies)
		return gone
	}
	if got.Budget.UsedTokens > onFile {
		t.Logf("trial %d: kill %s after %s; agent gone within %s; ledger %d tokens = delivered (%s), %d more than the CLI's own files hold; calls:\n%s",
			trial, killAfter, anchor, gone.Round(time.Millisecond), got.Budget.UsedTokens, replies, got.Budget.UsedTokens-onFile, callsOf(t, db, id))
		return gone
	}
	t.Logf("trial %d: kill %s after %s; agent gone within %s; ledger %d tokens = delivered (%s)",
		trial, killAfter, anchor, gone.Round(time.Millisecond), got.Budget.UsedTokens, replies)
	return gone
}

// mockDelivered sums the tokens of the replies the mock wrote whole to a
// client still there, by reply kind, and lists them.
func mockDelivered(t *testing.T, url string, tokens map[string]int64) (int64, string) {
	t.Helper()
	log := mockLog[struct {
		Did        string `json:"did"`
		ClientGone string `json:"client_gone"`
	}](t, url)
	var sum int64
	var replies []string
	for _, r := range log {
		// did is API_KIND_MODE, e.g. anthropic_tool_stream, responses_final_stream.
		f := strings.Split(r.Did, "_")
		if len(f) != 3 {
			continue
		}
		n, ok := tokens[f[1]]
		if !ok {
			continue
		}
		if r.ClientGone != "" {
			replies = append(replies, f[1]+" (client gone)")
			continue
		}
		sum += n
		replies = append(replies, f[1])
	}
	return sum, strings.Join(replies, ", ")
}

// mockCutStarts sums, over the replies the mock began to a client that was
// gone before it finished, what each one's start reported (started, by
// reply kind): the most a CLI may have booked of them.
func mockCutStarts(t *testing.T, url string, started map[string]int64) int64 {
	t.Helper()
	var sum int64
	for _, r := range mockLog[struct {
		Did        string `json:"did"`
		ClientGone string `json:"client_gone"`
	}](t, url) {
		if f := strings.Split(r.Did, "_"); len(f) == 3 && r.ClientGone != "" {
			sum += started[f[1]]
		}
	}
	return sum
}

// agentProcesses lists the processes of one trial's agent: those working in
// its workspace, or run with its HOME (or CODEX_HOME).
func agentProcesses(home, ws string) []string {
	left := processesIn(ws)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if k, v, ok := bytes.Cut(kv, []byte("=")); ok && string(v) == home && (string(k) == "HOME" || string(k) == "CODEX_HOME") {
				if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && isZombie(stat) {
					break
				}
				cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
				left = append(left, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
				break
			}
		}
	}
	return left
}

func isZombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && len(stat) > i+2 && stat[i+2] == 'Z'
}

// killAgents kills what a failed trial left, so the next starts clean.
func killAgents(home, ws string) {
	for _, p := range agentProcesses(home, ws) {
		if pid, err := strconv.Atoi(strings.SplitN(p, ":", 2)[0]); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// callsOf lists a task's calls as recorded — outcome, session file, note —
// and the session files under the trial's home, to tell why a ledger is
// short.
func callsOf(t *testing.T, db, taskID string) string {
	s, err := sqlite.Open(context.Background(), db)
	if err != nil {
		return err.Error()
	}
	defer s.Close()
	calls, err := s.Calls(context.Background(), taskID)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, c := range calls {
		fmt.Fprintf(&b, "  %s %s session=%q note=%q error=%q\n", c.ID, c.Outcome, c.Session, c.Note, c.Error)
	}
	return b.String()
}

// cliSpec is the backend spec of a trial's CLI, as far as reading its
// session files needs.
func cliSpec(name, dir, homeVar, home string) purser.BackendSpec {
	return purser.BackendSpec{Type: name, Dir: dir, Options: map[string]any{
		"command": filepath.Join(dir, name), "env": map[string]any{homeVar: home}}}
}

// cliRecorded sums the tokens the CLI's own session files hold for every
// call of the task, read by its backend's recovery (the session a call
// recorded, or the one it locates by workspace and start time), without
// Purser's wire journal.
func cliRecorded(t *testing.T, c killCLI, cliDir, home, ws, db, id string) int64 {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.OpenExisting(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	calls, err := store.Calls(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	claimed := map[string]bool{}
	for _, call := range calls {
		claimed[call.Session] = call.Session != ""
	}
	be, err := c.backend(cliDir, home)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, call := range calls {
		call.Wire = "" // the CLI's own files only: what Purser's wire meter adds is measured apart
		got, err := be.RecoverSpend(ctx, purser.SpendQuery{Call: call, Workspace: ws,
			Claimed: func(file string) bool { return file != call.Session && claimed[file] }})
		if err != nil {
			t.Fatalf("reading call %s's session file: %v", call.ID, err)
		}
		for _, ev := range got.Usage {
			sum += ev.Tokens()
		}
	}
	return sum
}
