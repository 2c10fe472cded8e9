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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser/sqlite"
)

// agentModel is an Anthropic server that answers the real Claude Code as
// a model that delegates: the main agent's first request is answered with
// one Agent tool call per prompt (Claude Code 2.1's spawn tool, its input
// streamed in input_json_delta pieces), a sub-agent's with subReplies in
// turn (a Bash call, then text), and the main agent's request carrying the
// tool results with "all done". The shared mock cannot send an Agent call.
type agentModel struct {
	prompts []string
	// subInput is the input tokens a sub-agent's reply reports; the main
	// agent's report mainInput. Every reply reports 50 output tokens.
	subInput, mainInput int64
	subTurns            int // requests a sub-agent makes: a Bash call each, then text

	mu   sync.Mutex
	log  []modelCall
	seen map[string]int // requests per sub-agent prompt
}

// modelCall is what the server saw of one request.
type modelCall struct {
	Sub     string // the sub-agent's prompt, "" for the main agent
	Results string // the tool results' text the request carries
}

func (m *agentModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/messages") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"input_tokens":10}`)
		return
	}
	var req struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	b, _ := io.ReadAll(r.Body)
	if json.Unmarshal(b, &req) != nil || len(req.Messages) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if !req.Stream {
		// Claude Code's side requests (a title, a check): not the agents' work.
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_side","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],`+
			`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}`)
		return
	}
	first, results := string(req.Messages[0].Content), ""
	var blocks []struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(req.Messages[len(req.Messages)-1].Content, &blocks) == nil {
		for _, bl := range blocks {
			if bl.Type == "tool_result" {
				results += string(bl.Content)
			}
		}
	}
	call := modelCall{Results: results}
	for _, p := range m.prompts {
		if strings.Contains(first, p) {
			call.Sub = p
		}
	}
	m.mu.Lock()
	m.log = append(m.log, call)
	turn := m.seen[call.Sub]
	m.seen[call.Sub]++
	seq := len(m.log)
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(data string) {
		var e struct{ Type string }
		_ = json.Unmarshal([]byte(data), &e)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Type, data)
	}
	input := m.mainInput
	if call.Sub != "" {
		input = m.subInput
	}
	ev(fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_%d","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":%d,"output_tokens":1}}}`, seq, input))
	stop := "tool_use"
	switch {
	case call.Sub == "" && results == "":
		for i, p := range m.prompts {
			in, _ := json.Marshal(map[string]string{"description": fmt.Sprintf("part %d", i+1), "prompt": p, "subagent_type": "general-purpose"})
			m.toolUse(ev, seq, i, "Agent", string(in))
		}
	case call.Sub != "" && turn < m.subTurns-1:
		m.toolUse(ev, seq, 0, "Bash", `{"command":"echo hi","description":"say hi"}`)
	default:
		stop = "end_turn"
		ev(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		ev(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"all done"}}`)
		ev(`{"type":"content_block_stop","index":0}`)
	}
	ev(fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":50}}`, stop))
	ev(`{"type":"message_stop"}`)
}

// toolUse streams a tool call, its input in pieces as a model sends it.
func (m *agentModel) toolUse(ev func(string), seq, i int, name, input string) {
	ev(fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":"toolu_%d_%d","name":%q,"input":{}}}`, i, seq, i, name))
	for j := 0; j < len(input); j += 9 {
		piece, _ := json.Marshal(input[j:min(j+9, len(input))])
		ev(fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, i, piece))
	}
	ev(fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
}

// calls is what the server saw.
func (m *agentModel) calls() []modelCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]modelCall(nil), m.log...)
}

// runDelegating runs the real Claude Code under purser against m with the
// task's subAgents: line, in Purser's box when box is set, and returns
// purser's output and the ledger's tokens per agent.
func runDelegating(t *testing.T, m *agentModel, subAgents string, box bool) (string, map[string]int64) {
	t.Helper()
	dir := clis(t)
	sandbox := ""
	env := []string{"ANTHROPIC_API_KEY=test"}
	if box {
		requireBox(t)
		sandbox = "\n  sandbox: on"
		env = append(env, "XDG_STATE_HOME="+t.TempDir())
	}
	m.seen = map[string]int{}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	bin := buildPurser(t)
	work := t.TempDir()
	home := filepath.Join(work, "home")
	for _, d := range []string{home, filepath.Join(work, "ws")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	task := fmt.Sprintf("id: delegate\ngoal: Split the work between sub-agents.\nworkspace: ./ws\nbackend:\n"+
		"  type: claude\n  command: %s\n  models: {standard: claude-sonnet-4-5}\n  allowedTools: [Bash, Read, Agent]\n"+
		"  env: {HOME: %s, ANTHROPIC_BASE_URL: %q}%s\nvalidators:\n  - {name: ok, run: 'true'}\n"+
		"budget:\n  hard: {usd: 5.0, maxIterations: 1}\n%s\n", filepath.Join(dir, "claude"), home, srv.URL, sandbox, subAgents)
	if err := os.WriteFile(filepath.Join(work, "task.yaml"), []byte(task), 0o644); err != nil {
		t.Fatal(err)
	}
	unboxedProject(t, work)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db := filepath.Join(work, "purser.db")
	cmd := exec.CommandContext(ctx, bin, "run", "task.yaml")
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
		per[u.Agent] += u.Totals.Tokens
	}
	return string(out), per
}

// Issue 25, sub-agents as budget nodes, with the real Claude Code: the
// main agent spawns two sub-agents under maxSpawn 1. The first request of
// the one that comes second is refused at the door before it reaches the
// model; Claude
// Code's Agent tool hands the refusal to the main agent as its result,
// which goes on and finishes: the task is DONE, and the ledger holds
// exactly what the replies reported.
func TestClaudeCodeSpawnPastMaxSpawnRefused(t *testing.T) {
	m := &agentModel{prompts: []string{"SUBTASK-ONE: count the files.", "SUBTASK-TWO: count the lines."},
		subInput: 2_000, mainInput: 1_000, subTurns: 1}
	out, per := runDelegating(t, m, "subAgents: {maxSpawn: 1}", false)
	calls := m.calls()
	var told bool
	subs := map[string]int{}
	for _, c := range calls {
		subs[c.Sub]++
		told = told || strings.Contains(c.Results, "purser: sub-agent limit: 1 of maxSpawn 1 already spawned")
	}
	if !told {
		t.Errorf("the main agent was never told of the refused spawn: %+v\n%s", calls, out)
	}
	// The two sub-agents start together: whichever reaches the door first
	// is spawn 1, the other is refused before it reaches the model.
	if subs[m.prompts[0]]+subs[m.prompts[1]] != 1 || subs[""] != 2 {
		t.Errorf("requests per agent %v: want the main agent's 2, one sub-agent's 1, none of the other's", subs)
	}
	// Main: 2 replies of 1,000 + 50; the first sub-agent: 1 of 2,000 + 50;
	// nothing of the refused one. Sub-agents spawned together stream none
	// of their messages to Claude Code's stdout: the claude backend reads
	// their transcripts before the result settles the rest, so each is
	// booked to the sub-agent that spent it.
	var total int64
	subSpent := 0
	for agent, n := range per {
		total += n
		if agent != "" && n == 2_050 {
			subSpent++
		}
	}
	if total != 4_150 || per[""] != 2_100 || subSpent != 1 || len(per) != 2 {
		t.Errorf("ledger per agent %v, want 4150 tokens in all: the main agent's 2100, one sub-agent's 2050\n%s", per, out)
	}
}

// The sub-agent's own cap: its first reply reports 190,000 input tokens,
// so its next request (a Bash call's result) does not fit the 200,000 of
// each: it is refused, the sub-agent stops, the main agent is told and
// finishes DONE, and the ledger books the sub-agent only what it spent;
// in Purser's box (the door its only way out) as out of it.
func TestClaudeCodeSubAgentStoppedAtItsCap(t *testing.T) {
	for _, box := range []bool{false, true} {
		t.Run(fmt.Sprintf("sandbox=%v", box), func(t *testing.T) { subAgentStoppedAtItsCap(t, box) })
	}
}

func subAgentStoppedAtItsCap(t *testing.T, box bool) {
	m := &agentModel{prompts: []string{"SUBTASK-ONE: count the files."}, subInput: 190_000, mainInput: 1_000, subTurns: 3}
	out, per := runDelegating(t, m, "subAgents: {maxSpawn: 8, each: {usd: 5.0, tokens: 200000}}", box)
	calls := m.calls()
	var told bool
	subs := map[string]int{}
	for _, c := range calls {
		subs[c.Sub]++
		told = told || strings.Contains(c.Results, "purser: sub-agent 1 at its cap (190050 of 200000 tokens")
	}
	if !told {
		t.Errorf("the main agent was never told the sub-agent was stopped: %+v\n%s", calls, out)
	}
	if subs[m.prompts[0]] != 1 || subs[""] != 2 {
		t.Errorf("requests per agent %v: want the sub-agent's first only, the main agent's 2", subs)
	}
	if per[""] != 2_100 || per["general-purpose: part 1"] != 190_050 || len(per) != 2 {
		t.Errorf("ledger per agent %v, want main 2100, part 1 190050\n%s", per, out)
	}
}
