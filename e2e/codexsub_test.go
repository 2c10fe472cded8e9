package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser/sqlite"
)

// codexModel is an OpenAI Responses server that answers the real Codex
// (0.169.0, multi_agent_v2) as a model that delegates. The main agent
// (/root) is answered, first, with one spawn_agent call per prompt (its
// collaboration tool; the sub-agent starts without the parent's history),
// then with wait_agent until every sub-agent's final answer is in its
// input (at most maxWaits times), then with text. A sub-agent (a thread
// named /root/part_i, told apart by the headers Codex sends) is answered
// with an exec_command call per turn, then text. Every reply reports 50
// output tokens and mainInput or subInput input tokens.
type codexModel struct {
	prompts             []string
	subInput, mainInput int64
	subTurns            int

	mu   sync.Mutex
	log  []codexCall
	seen map[string]int // requests per agent
}

// codexCall is what the server saw of one request.
type codexCall struct {
	Agent   string // the agent's task path: /root, /root/part_1…
	Results string // the sub-agents' messages to the parent in its input
}

// maxWaits bounds the main agent's wait_agent calls.
const maxWaits = 6

// codexItem is the part of a Responses input item the server reads.
type codexItem struct {
	Type    string `json:"type"`
	Author  string `json:"author"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
}

func (m *codexModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data":[],"models":[]}`)
		return
	}
	var req struct {
		Input []codexItem `json:"input"`
	}
	b, _ := io.ReadAll(r.Body)
	if json.Unmarshal(b, &req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var meta struct {
		AgentName string `json:"agent_name"`
	}
	_ = json.Unmarshal([]byte(r.Header.Get("x-codex-turn-metadata")), &meta)
	call := codexCall{Agent: meta.AgentName}
	outputs, finals := 0, 0
	for _, it := range req.Input {
		switch {
		case it.Type == "function_call_output":
			outputs++
		case it.Type == "agent_message" && it.Author != "/root":
			for _, c := range it.Content {
				call.Results += c.Text
				if strings.Contains(c.Text, "FINAL_ANSWER") {
					finals++
				}
			}
		}
	}
	m.mu.Lock()
	m.log = append(m.log, call)
	turn := m.seen[call.Agent]
	m.seen[call.Agent]++
	id := fmt.Sprintf("resp_%d", len(m.log))
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(data map[string]any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", data["type"], b)
	}
	ev(map[string]any{"type": "response.created", "response": map[string]any{"id": id}})
	input := m.subInput
	switch {
	case call.Agent == "/root" && outputs == 0:
		input = m.mainInput
		for i, p := range m.prompts {
			args, _ := json.Marshal(map[string]string{"task_name": fmt.Sprintf("part_%d", i+1), "message": p, "fork_turns": "none"})
			m.call(ev, id, i, "spawn_agent", "collaboration", string(args))
		}
	case call.Agent == "/root" && finals < len(m.prompts) && turn <= maxWaits:
		input = m.mainInput
		m.call(ev, id, 0, "wait_agent", "collaboration", `{"timeout_ms":20000}`)
	case call.Agent == "/root":
		input = m.mainInput
		m.text(ev, id, "all done")
	case turn < m.subTurns-1:
		m.call(ev, id, 0, "exec_command", "", `{"cmd":"echo hi"}`)
	default:
		m.text(ev, id, "counted")
	}
	ev(map[string]any{"type": "response.completed", "response": map[string]any{"id": id, "usage": map[string]any{
		"input_tokens": input, "input_tokens_details": map[string]int{"cached_tokens": 0},
		"output_tokens": 50, "output_tokens_details": map[string]int{"reasoning_tokens": 0}, "total_tokens": input + 50}}})
}

// call sends a function call item (in its tool namespace, if any).
func (m *codexModel) call(ev func(map[string]any), id string, i int, name, namespace, args string) {
	item := map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%s_%d", id, i), "call_id": fmt.Sprintf("call_%s_%d", id, i), "name": name, "arguments": args}
	if namespace != "" {
		item["namespace"] = namespace
	}
	ev(map[string]any{"type": "response.output_item.done", "item": item})
}

// text sends an assistant message.
func (m *codexModel) text(ev func(map[string]any), id, text string) {
	ev(map[string]any{"type": "response.output_item.done", "item": map[string]any{"type": "message", "role": "assistant", "id": "msg_" + id,
		"content": []map[string]any{{"type": "output_text", "text": text, "annotations": []any{}}}}})
}

// calls is what the server saw.
func (m *codexModel) calls() []codexCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]codexCall(nil), m.log...)
}

// perAgent is the tokens the server's replies reported per agent: the
// ledger must hold exactly these.
func (m *codexModel) perAgent() map[string]int64 {
	out := map[string]int64{}
	for _, c := range m.calls() {
		in := m.subInput
		if c.Agent == "/root" {
			in = m.mainInput
		}
		out[strings.TrimPrefix(c.Agent, "/root")] += in + 50
	}
	return out
}

// runCodexDelegating runs the real Codex under purser against m with
// multi-agent on and the task's subAgents: line, in Purser's box when box
// is set, and returns purser's output, the ledger's tokens per agent (each
// sub-agent by its task path less /root) and the task's directory.
func runCodexDelegating(t *testing.T, m *codexModel, subAgents string, box bool) (string, map[string]int64, string) {
	t.Helper()
	dir := clis(t)
	m.seen = map[string]int{}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	work := t.TempDir()
	home := filepath.Join(work, "home")
	for _, d := range []string{home, filepath.Join(work, "ws")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	backend, env := codexAgainstMock(t, dir, home, srv.URL)
	backend += "\n  args: [--enable, multi_agent_v2]"
	if box {
		requireBox(t)
		backend += "\n  sandbox: on"
		env = append(env, "XDG_STATE_HOME="+t.TempDir())
	}
	task := fmt.Sprintf("id: delegate\ngoal: Split the work between sub-agents.\nworkspace: ./ws\nbackend:\n%s\n"+
		"validators:\n  - {name: ok, run: 'true'}\nbudget:\n  hard: {usd: 5.0, maxIterations: 1}\n%s\n", backend, subAgents)
	if err := os.WriteFile(filepath.Join(work, "task.yaml"), []byte(task), 0o644); err != nil {
		t.Fatal(err)
	}
	unboxedProject(t, work)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db := filepath.Join(work, "purser.db")
	cmd := exec.CommandContext(ctx, buildPurser(t), "run", "task.yaml")
	cmd.Dir = work
	cmd.Env = append(append(os.Environ(), env...), "PURSER_DB="+db)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("purser run: %v\n%s", err, out)
	}
	s, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	usage, err := s.CallUsage(ctx, "delegate")
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int64{}
	for _, u := range usage {
		per[strings.TrimPrefix(u.Agent, "/root")] += u.Totals.Tokens
	}
	t.Logf("ledger per agent %v; the model saw %+v", per, m.calls())
	return string(out), per, work
}

// Issue 25 with the real Codex: the main agent spawns two sub-agents under
// maxSpawn 1. Whichever thread reaches the door second is refused at its
// first request, before the model; Codex fails that sub-agent's turn and
// hands the refusal to the parent as its final answer, and the parent
// finishes: DONE, and the ledger holds, per agent, exactly what the
// replies reported (the refused sub-agent nothing).
func TestCodexSpawnPastMaxSpawnRefused(t *testing.T) {
	for _, box := range []bool{false, true} {
		t.Run(fmt.Sprintf("sandbox=%v", box), func(t *testing.T) {
			m := &codexModel{prompts: []string{"SUBTASK-ONE: count the files.", "SUBTASK-TWO: count the lines."},
				subInput: 2_000, mainInput: 1_000, subTurns: 1}
			out, per, _ := runCodexDelegating(t, m, "subAgents: {maxSpawn: 1}", box)
			var told bool
			subs := map[string]int{}
			for _, c := range m.calls() {
				subs[c.Agent]++
				told = told || strings.Contains(c.Results, "purser: sub-agent limit: 1 of maxSpawn 1 already spawned")
			}
			if !told {
				t.Errorf("the main agent was never told of the refused spawn: %+v\n%s", m.calls(), out)
			}
			if subs["/root/part_1"]+subs["/root/part_2"] != 1 || subs["/root"] < 3 {
				t.Errorf("requests per agent %v: want one sub-agent's 1, none of the other's, the main agent's 3 or more", subs)
			}
			want := m.perAgent()
			if fmt.Sprint(per) != fmt.Sprint(want) || len(per) != 2 {
				t.Errorf("ledger per agent %v, want what the replies reported: %v\n%s", per, want, out)
			}
		})
	}
}

// The sub-agent's own cap: its first reply reports 190,000 input tokens,
// so its next request (with the exec_command result) does not fit the
// 200,000 of each: it is refused, Codex fails the sub-agent's turn, the
// parent is told and finishes DONE, and the ledger books the sub-agent
// only what it spent; in Purser's box as out of it.
func TestCodexSubAgentStoppedAtItsCap(t *testing.T) {
	for _, box := range []bool{false, true} {
		t.Run(fmt.Sprintf("sandbox=%v", box), func(t *testing.T) {
			m := &codexModel{prompts: []string{"SUBTASK-ONE: count the files."}, subInput: 190_000, mainInput: 1_000, subTurns: 3}
			out, per, work := runCodexDelegating(t, m, "subAgents: {maxSpawn: 8, each: {usd: 5.0, tokens: 200000}}", box)
			var told bool
			subs := map[string]int{}
			for _, c := range m.calls() {
				subs[c.Agent]++
				told = told || strings.Contains(c.Results, "purser: sub-agent 1 at its cap (190050 of 200000 tokens")
			}
			if !told {
				t.Errorf("the main agent was never told the sub-agent was stopped: %+v\n%s", m.calls(), out)
			}
			if subs["/root/part_1"] != 1 {
				t.Errorf("requests per agent %v: want the sub-agent's first only", subs)
			}
			if per["/part_1"] != 190_050 || per[""] != m.perAgent()[""] || len(per) != 2 {
				t.Errorf("ledger per agent %v, want main %d, /root/part_1 190050\n%s", per, m.perAgent()[""], out)
			}
			spendShown(t, work, "/root/part_1", 190_050)
		})
	}
}

// spendShown checks that `purser explain` and the task's BUDGET.md show
// what sub-agent spent.
func spendShown(t *testing.T, work, agent string, tokens int64) {
	t.Helper()
	cmd := exec.Command(buildPurser(t), "explain", "delegate")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PURSER_DB="+filepath.Join(work, "purser.db"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("purser explain: %v\n%s", err, out)
	}
	if !regexp.MustCompile(regexp.QuoteMeta(agent) + `\s+1 call\(s\)\s+` + fmt.Sprint(tokens) + ` tokens`).Match(out) {
		t.Errorf("purser explain shows no %d tokens of %s:\n%s", tokens, agent, out)
	}
	md, err := os.ReadFile(filepath.Join(work, "ws", "BUDGET.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "Per sub-agent") || !strings.Contains(string(md), agent) {
		t.Errorf("BUDGET.md has no row of %s:\n%s", agent, md)
	}
}
