package e2e_test

// A real agent's reply cut while it streams: the pausing relay
// (pausingrelay_test.go) holds the agent's second reply after its first
// event, and the task's time cap cuts it there. The task ends BLOCKED with
// the cut reply booked as the provider bills a reply it started (its
// input), and the agent sends nothing more: no silent retry.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser/backend/backendtest"
)

// checkCut fails the test unless the relay held a reply until the cap cut
// it, and no model request came after it.
func checkCut(t *testing.T, relay *pausingRelay, capAt time.Duration) {
	t.Helper()
	held, first, heldFor, after := relay.state()
	// The relay notes the hang-up once it sees the door's connection close,
	// which may come a moment after purser's exit on a loaded machine.
	for deadline := time.Now().Add(10 * time.Second); held && heldFor <= 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		held, first, heldFor, after = relay.state()
	}
	if !held {
		t.Fatal("the relay never held a reply: no reply was cut mid-stream")
	}
	if heldFor <= 0 {
		t.Error("the door never hung up on the held reply")
	}
	if after != 0 {
		t.Errorf("%d model request(s) reached the provider after the cut reply: a silent retry", after)
	}
	t.Logf("the reply was held after its first event (%s) for %s, until the cap (%s) cut it; no request after it",
		strings.TrimSpace(strings.SplitN(first, "\n", 2)[0]), heldFor.Round(time.Millisecond), capAt)
}

func TestCLIsCutMidReplyAtTheTimeCap(t *testing.T) {
	dir := clis(t)
	for _, cli := range []struct {
		name    string
		setup   func(t *testing.T, dir, home, url string) (string, []string)
		nth     int
		wantTok int64
		wantUSD float64
	}{
		// The tool call (5,560), then "done" cut after its message_start,
		// which says its input (1,300 + 100 + 4,500) and one output token:
		// Claude's own report of the cut reply, or the wire journal's
		// reconciliation, books that much.
		{"claude", claudeAgainstMock, 2, 11461, 0.012465},
		// The tool call (5,260), then "done" cut after response.created,
		// which says no usage: the door journals its own count of the cut
		// request's input (the provider bills it), and the call's
		// reconciliation books it, since Codex never saw the reply. The
		// tokens: the first reply's bill and that count (countedCut); the
		// dollars: more than the first reply's $0.0098.
		{"codex", codexAgainstMock, 2, -1, 0.0098},
		// The mock sends Gemini's "done" as one event, usage and all: the
		// stream is cut before its end, after the usage; booked whole
		// (5,280 + 5,805) from Gemini CLI's chat file.
		{"gemini", geminiAgainstMock, 2, 11085, 0.0050375},
	} {
		t.Run(cli.name, func(t *testing.T) {
			relay, url := startPausingRelay(t, backendtest.StartMock(t), cli.nth)
			backend, env := cli.setup(t, dir, t.TempDir(), url)
			sc := scenario{name: cli.name + "-cut", goal: goalDone, budget: budgetTime30, backend: backend, env: env,
				wantExit: 3, wantState: "BLOCKED", wantTok: cli.wantTok, wantUSD: cli.wantUSD, stopWithin: stopWithin, timeCap: 30 * time.Second}
			if cli.wantTok < 0 {
				sc.tokRange = func() (int64, int64) { return countedCut(t, url, cli.nth) }
			}
			runScenario(t, sc)
			checkCut(t, relay, 30*time.Second)
		})
	}
}

// countedCut is what the ledger should hold when a Chat Completions reply
// is cut after its first event (which says no usage): the bills of the
// replies before it, and the door's count of the cut request's input at
// the rate they taught it (doorCount). The door counted the body before its
// grant rewrote it (a few bytes: an output bound added), so the range allows
// 1 % either way.
func countedCut(t *testing.T, url string, nth int) (lo, hi int64) {
	t.Helper()
	d := &doorCount{rate: map[string]int64{}}
	var billed, counted int64
	n := 0
	for _, e := range mockLog[struct {
		Did       string `json:"did"`
		BodyBytes int64  `json:"body_bytes"`
		Summary   struct {
			API   string `json:"api"`
			Model string `json:"model"`
		} `json:"summary"`
		Plan struct {
			Kind string `json:"kind"`
		} `json:"plan"`
	}](t, url) {
		kind := mockKind(e.Did, e.Plan.Kind)
		b, ok := mockBilled[e.Summary.API][kind]
		if !ok {
			continue
		}
		if n++; n == nth {
			counted, _ = d.count(e.Summary.Model, e.BodyBytes)
			break
		}
		// The mock's output: 60 for a tool call, 5 for "done", 3 for a side call.
		billed += b + map[string]int64{"tool": 60, "final": 5, "side": 3}[kind]
		d.learn(e.Summary.Model, e.BodyBytes, b)
	}
	if counted == 0 {
		t.Fatalf("the mock's log has no request %d", nth)
	}
	return billed + counted*99/100, billed + counted*101/100
}

// agentCut is one agent's cut: what the ledger holds after it (a range
// where the door books its own count of the cut request's input, which
// moves with the length of the test's temporary paths) and what the
// call's note says of the door.
type agentCut struct {
	name           string
	bin            string
	setup          agentSetup
	nth            int // the model request whose reply is held
	tokLo, tokHi   int64
	wantNote       string
	wantCutBooking string // why the ledger holds what it does
}

// runAgentCut runs one agent through its door and the pausing relay under
// a one-minute time cap, with a validator it never satisfies.
func runAgentCut(t *testing.T, c agentCut) {
	purser := buildPurser(t)
	relay, url := startPausingRelay(t, backendtest.StartMock(t), c.nth)
	dir := t.TempDir()
	ws, home := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	for _, d := range []string{ws, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Unboxed, as the agents' other cuts are written (their boxed runs are
	// agent_door_test.go's): the box would need the agents' npm install
	// named under readOnly:.
	unboxedProject(t, dir)
	task := fmt.Sprintf("id: %s\ngoal: %q\nworkspace: ./ws\nbackend:\n%s\nvalidators:\n  - name: check\n    run: %q\nbudget:\n%s\n",
		c.name, goalPlain, c.setup(t, c.bin, home, url), notDone, budgetTime)
	if err := os.WriteFile(filepath.Join(dir, "task.yaml"), []byte(task), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	db := filepath.Join(dir, "purser.db")
	cmd := exec.CommandContext(ctx, purser, "run", "task.yaml")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PURSER_DB="+db, "PURSER_E2E_REAL_KEY="+realKey)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 3 {
		t.Fatalf("exit %d, want 3 (BLOCKED by the time cap)\n%s", code, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(processesIn(ws)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if left := processesIn(ws); len(left) > 0 {
		t.Errorf("processes still running in the workspace 30 s after purser exited: %v", left)
	}
	st, err := exec.Command(purser, "status", c.name, "--json", "--db", db).Output()
	if err != nil {
		t.Fatal(err)
	}
	var status struct{ Tasks []taskStatus }
	if err := json.Unmarshal(st, &status); err != nil || len(status.Tasks) != 1 {
		t.Fatalf("status: %v %s", err, st)
	}
	got := status.Tasks[0]
	note := callNotes(t, db)
	t.Logf("%s: %s, %d tokens, $%f %s; the call's note: %s", c.name, got.Status, got.Budget.UsedTokens, got.Budget.UsedUSD, got.Budget.USDSource, note)
	lo, hi := c.tokLo, c.tokHi
	if lo == 0 {
		lo, hi = countedCut(t, url, c.nth)
	}
	if got.Status != "BLOCKED" || got.Budget.UsedTokens < lo || got.Budget.UsedTokens > hi {
		t.Errorf("status %+v, want BLOCKED with %d–%d tokens (%s)\n%s", got, lo, hi, c.wantCutBooking, out)
	}
	if !strings.Contains(note, c.wantNote) {
		t.Errorf("the call's note %q does not say %q", note, c.wantNote)
	}
	checkCut(t, relay, time.Minute)
}

func TestAgentsCutMidReplyAtTheTimeCap(t *testing.T) {
	for _, c := range []agentCut{
		// The title (53 tokens), then the answer cut after its
		// message_start, which says its input (1,200 + 300 + 4,000) and
		// one output token: booked exactly.
		{name: "opencode-cut", bin: "opencode", setup: opencodeBackend, nth: 2, tokLo: 5554, tokHi: 5554,
			wantNote: "door (anthropic): 2 request(s), 2 reply(ies) booked, 1 cut mid-reply", wantCutBooking: "the title and the cut answer's message_start"},
		// The answer (5,805), then Qwen's memory extraction cut after its
		// first chunk, which says no usage: the door's count of its input,
		// at the rate the answer taught it. (The mock bills every request
		// with tools 5,800 whatever its size; this one is about half the
		// answer's bytes, so the count is under what the mock would bill: a
		// real provider bills by size.)
		{name: "qwen-cut", bin: "qwen", setup: qwenBackend, nth: 2,
			wantNote: "door (openai-chat): 2 request(s), 2 reply(ies) booked, 1 cut mid-reply", wantCutBooking: "the answer and the door's count of the cut request"},
		// The tool call (5,260), then the answer cut after its first chunk:
		// the door's count of its input. Cline retries the cut request; the
		// door, its call over, refuses it (it never reaches the provider).
		{name: "cline-cut", bin: "cline", setup: clineBackend, nth: 2,
			wantNote: "door (openai-chat): 2 request(s), 2 reply(ies) booked, 1 refused, 1 cut mid-reply", wantCutBooking: "the tool call and the door's count of the cut request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.bin = agentsDir(t, c.bin)
			runAgentCut(t, c)
		})
	}
}
