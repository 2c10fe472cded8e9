package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// A Task tool_use starts a sub-agent; Claude Code marks that sub-agent's
// messages with parent_tool_use_id, the tool_use's id (anthropics/claude-code
// #22625 asks for spend per sub-agent).
const (
	mainStartsTask = `{"type":"assistant","message":{"id":"msg_main1","model":"claude-opus-4-8","content":[{"type":"text","text":"Delegating."},` +
		`{"type":"tool_use","id":"toolu_01A","name":"Task","input":{"description":"Find the  flaky test","subagent_type":"general-purpose","prompt":"..."}}],` +
		`"usage":{"input_tokens":100,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":20}},"parent_tool_use_id":null,"session_id":"s"}`
	subAgentStream = `{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_sub1","model":"claude-haiku-4-5","content":[],` +
		`"usage":{"input_tokens":300,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}},"parent_tool_use_id":"toolu_01A","session_id":"s"}`
	subAgentDelta = `{"type":"stream_event","event":{"type":"message_delta","usage":{"output_tokens":40}},"parent_tool_use_id":"toolu_01A","session_id":"s"}`
	subAgentFinal = `{"type":"assistant","message":{"id":"msg_sub1","model":"claude-haiku-4-5","content":[{"type":"text","text":"found"}],` +
		`"usage":{"input_tokens":300,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":55}},"parent_tool_use_id":"toolu_01A","session_id":"s"}`
	unseenSubAgent = `{"type":"assistant","message":{"id":"msg_sub2","model":"claude-haiku-4-5","content":[],` +
		`"usage":{"input_tokens":7,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":3}},"parent_tool_use_id":"toolu_09Z","session_id":"s"}`
	mainAgain = `{"type":"assistant","message":{"id":"msg_main2","model":"claude-opus-4-8","content":[{"type":"text","text":"Done."}],` +
		`"usage":{"input_tokens":500,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":9}},"parent_tool_use_id":null,"session_id":"s"}`
)

func feedAll(t *testing.T, lines ...string) []budget.UsageEvent {
	t.Helper()
	p := NewParser()
	var out []budget.UsageEvent
	for i, l := range lines {
		evs, err := p.Feed([]byte(l))
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		out = append(out, evs...)
	}
	return out
}

func TestSubAgentUsageIsAttributedToTheSubAgent(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		// want is tokens per agent, summed over the events.
		want map[string]int64
	}{
		{"the main agent alone is the empty agent", []string{mainAgain}, map[string]int64{"": 509}},
		{"a Task sub-agent is named by its type and description, across its streamed snapshots",
			[]string{mainStartsTask, subAgentStream, subAgentDelta, subAgentFinal, mainAgain},
			map[string]int64{"": 120 + 509, "general-purpose: Find the flaky test": 300 + 55}},
		{"a sub-agent whose start was not seen is named by its tool_use id",
			[]string{unseenSubAgent}, map[string]int64{"toolu_09Z": 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]int64{}
			for _, ev := range feedAll(t, tt.lines...) {
				got[ev.Agent] += ev.Tokens()
			}
			if len(got) != len(tt.want) {
				t.Fatalf("tokens per agent = %v, want %v", got, tt.want)
			}
			for a, n := range tt.want {
				if got[a] != n {
					t.Errorf("tokens of agent %q = %d, want %d (all: %v)", a, got[a], n, got)
				}
			}
		})
	}
}

func TestAnAgentToolUseNamesTheSubAgentToo(t *testing.T) {
	start := strings.Replace(mainStartsTask, `"name":"Task"`, `"name":"Agent"`, 1)
	evs := feedAll(t, start, subAgentFinal)
	if got := evs[len(evs)-1].Agent; got != "general-purpose: Find the flaky test" {
		t.Errorf("agent = %q", got)
	}
}

func TestOtherToolUsesStartNoSubAgent(t *testing.T) {
	start := strings.Replace(mainStartsTask, `"name":"Task"`, `"name":"Bash"`, 1)
	evs := feedAll(t, start, subAgentFinal)
	// A parent_tool_use_id that no Task started still marks a sub-agent:
	// the id is all there is to name it by.
	if got := evs[len(evs)-1].Agent; got != "toolu_01A" {
		t.Errorf("agent = %q, want the tool_use id", got)
	}
}

func TestALongDescriptionIsCut(t *testing.T) {
	long := strings.Repeat("word ", 40)
	start := strings.Replace(mainStartsTask, "Find the  flaky test", long, 1)
	evs := feedAll(t, start, subAgentFinal)
	got := evs[len(evs)-1].Agent
	if n := len([]rune(got)); n != maxAgentName || !strings.HasPrefix(got, "general-purpose: word word") || !strings.HasSuffix(got, "…") {
		t.Errorf("agent = %q (%d runes), want %d runes ending in …", got, n, maxAgentName)
	}
}

// The recorded fixtures have only the main agent (parent_tool_use_id is
// null on every line): every event they give stays the main agent's.
func TestFixturesWithoutSubAgentsAttributeAllToTheMainAgent(t *testing.T) {
	names, err := filepath.Glob("testdata/*.stdout.jsonl")
	if err != nil || len(names) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	events := 0
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		p := NewParser()
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(l)) == 0 {
				continue
			}
			evs, _ := p.Feed(l)
			for _, ev := range evs {
				events++
				if ev.Agent != "" {
					t.Errorf("%s: agent = %q, want the main agent", name, ev.Agent)
				}
			}
		}
	}
	if events == 0 {
		t.Fatal("the fixtures gave no usage")
	}
}

func TestASecretInTheDescriptionNeverNamesTheSubAgent(t *testing.T) {
	const secret = "sk-ant-api03-plantedplantedplantedplanted0123456789"
	start := strings.Replace(mainStartsTask, "Find the  flaky test", "try key "+secret, 1)
	evs := feedAll(t, start, subAgentFinal)
	got := evs[len(evs)-1].Agent
	if strings.Contains(got, secret) || !strings.HasPrefix(got, "general-purpose: try key") {
		t.Errorf("agent = %q: the secret must be masked, the rest kept", got)
	}
}

// resultLine is a final result whose modelUsage gives opusCost to the main
// agent's model (named as the result names it, with its context tag) and
// haikuCost to the sub-agent's; opusIn is the main model's reported input.
func resultLine(opusIn int64, opusCost, haikuCost string) string {
	return fmt.Sprintf(`{"type":"result","subtype":"success","is_error":false,"total_cost_usd":%s,"session_id":"s","modelUsage":{`+
		`"claude-opus-4-8[1m]":{"inputTokens":%d,"outputTokens":29,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"costUSD":%s},`+
		`"claude-haiku-4-5":{"inputTokens":300,"outputTokens":55,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"costUSD":%s}}}`,
		addDecimal(opusCost, haikuCost), opusIn, opusCost, haikuCost)
}

func addDecimal(a, b string) string {
	x, _ := budget.ParseUSD(a)
	y, _ := budget.ParseUSD(b)
	return strconv.FormatFloat((x + y).Float(), 'f', -1, 64)
}

// perToken prices every token at a microdollar, except the models in
// unpriced, which the catalogue lacks.
func perToken(unpriced ...string) func(budget.UsageEvent) budget.UsageEvent {
	return func(ev budget.UsageEvent) budget.UsageEvent {
		if slices.Contains(unpriced, ev.Model) {
			ev.USD, ev.CostSource = 0, budget.CostUnknown
			return ev
		}
		ev.USD, ev.CostSource = budget.USD(ev.Tokens()*1000), budget.CostEstimated
		return ev
	}
}

// The main agent streams 629 opus tokens (629,000 nano-USD at the test's
// price) and the sub-agent 355 haiku tokens (355,000).
func TestReconcileBooksEachAgentItsShare(t *testing.T) {
	const sub = "general-purpose: Find the flaky test"
	type booked struct {
		usd     budget.USD
		tokens  int64
		settles int64
	}
	tests := []struct {
		name    string
		lines   []string
		price   func(budget.UsageEvent) budget.UsageEvent
		want    map[string]booked
		wantSum budget.USD // the adjustment's dollars: the report less the estimate
	}{
		{"each agent lands on its model's reported cost",
			[]string{mainStartsTask, subAgentFinal, mainAgain, resultLine(600, "0.001", "0.0005")}, perToken(),
			map[string]booked{"": {usd: 1_000_000 - 629_000}, sub: {usd: 500_000 - 355_000}}, 516_000},
		{"a sub-agent on a model without a price gets its whole share and settles its own unknowns",
			[]string{mainStartsTask, subAgentFinal, mainAgain, resultLine(600, "0.001", "0.0005")}, perToken("claude-haiku-4-5"),
			map[string]booked{"": {usd: 1_000_000 - 629_000}, sub: {usd: 500_000, settles: 1}}, 871_000},
		{"an agent estimated above its share gives up nothing; the rest goes by the others' shortfall",
			[]string{mainStartsTask, subAgentFinal, mainAgain, resultLine(600, "0.0005", "0.001")}, perToken(),
			map[string]booked{sub: {usd: 1_500_000 - 984_000}}, 516_000},
		{"tokens the stream missed go to the agent with the largest share",
			[]string{mainStartsTask, subAgentFinal, mainAgain, resultLine(610, "0.001", "0.0005")}, perToken(),
			map[string]booked{"": {usd: 1_000_000 - 629_000, tokens: 10}, sub: {usd: 500_000 - 355_000}}, 516_000},
		{"the main agent alone gets the one adjustment",
			[]string{mainAgain, `{"type":"result","subtype":"success","total_cost_usd":0.001,"modelUsage":{"claude-opus-4-8":{"inputTokens":500,"outputTokens":9,"costUSD":0.001}}}`},
			perToken(), map[string]booked{"": {usd: 1_000_000 - 509_000}}, 491_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewParser()
			for i, l := range tt.lines {
				if _, err := p.Feed([]byte(l)); err != nil {
					t.Fatalf("line %d: %v", i+1, err)
				}
			}
			adj, note := p.Reconcile(tt.price)
			got := map[string]booked{}
			var sum budget.USD
			for _, ev := range adj {
				if err := ev.Validate(); err != nil {
					t.Fatalf("invalid adjustment %+v: %v", ev, err)
				}
				if ev.CostSource != budget.CostReported {
					t.Errorf("adjustment of %q is %v, want reported", ev.Agent, ev.CostSource)
				}
				if _, twice := got[ev.Agent]; twice {
					t.Errorf("two adjustments for agent %q", ev.Agent)
				}
				got[ev.Agent] = booked{usd: ev.USD, tokens: ev.Tokens(), settles: ev.SettlesUnknown}
				sum += ev.USD
			}
			if sum != tt.wantSum {
				t.Errorf("adjustments sum to %s, want exactly %s (note %q)", sum, tt.wantSum, note)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("booked %+v, want %+v (note %q)", got, tt.want, note)
			}
		})
	}
}

// Transcript lines in the shape of the captured Claude Code 2.1.197
// transcript (testdata/sigterm.after-tool-turn.transcript.jsonl). No
// captured transcript has a sub-agent: its lines follow the layout Claude
// Code 2.1 writes, <session>/subagents/agent-<agentId>.jsonl, whose lines
// carry isSidechain and agentId, with the session's Task tool_result naming
// the agentId; the messages are those of the stream lines above.
func transcriptAssistant(sidechain bool, agentID, message string) string {
	return fmt.Sprintf(`{"parentUuid":"u0","isSidechain":%t,%s"message":%s,"type":"assistant","uuid":"u1",`+
		`"timestamp":"2026-11-22T02:38:20.317Z","userType":"external","entrypoint":"sdk-cli","cwd":"/ws","sessionId":"s","version":"2.1.197"}`,
		sidechain, agentField(agentID), message)
}

func agentField(agentID string) string {
	if agentID == "" {
		return ""
	}
	return fmt.Sprintf(`"agentId":%q,`, agentID)
}

// messageOf is the "message" of a stream line above.
func messageOf(t *testing.T, streamLine string) string {
	t.Helper()
	var l struct {
		Message json.RawMessage `json:"message"`
	}
	if err := json.Unmarshal([]byte(streamLine), &l); err != nil || len(l.Message) == 0 {
		t.Fatalf("no message in %s: %v", streamLine, err)
	}
	return string(l.Message)
}

const (
	// The Task's tool_result in the session's transcript, naming the
	// sub-agent's agentId in toolUseResult, or only in its text.
	taskResultLine = `{"parentUuid":"u1","isSidechain":false,"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_01A","type":"tool_result",` +
		`"content":[{"type":"text","text":"found it"}]}]},"uuid":"u2","timestamp":"2026-11-22T02:38:21.000Z",` +
		`"toolUseResult":{"status":"completed","agentId":"a1b2c3d","totalTokens":355},"sessionId":"s","version":"2.1.197"}`
	taskResultTextOnly = `{"parentUuid":"u1","isSidechain":false,"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_01A","type":"tool_result",` +
		`"content":[{"type":"text","text":"found it\nagentId: a1b2c3d (for resuming)"}]}]},"uuid":"u2","sessionId":"s","version":"2.1.197"}`
	promptLine = `{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"Find the flaky test."},"uuid":"u0","sessionId":"s"}`
)

func TestTranscriptBooksSubAgentsToThem(t *testing.T) {
	const named = "general-purpose: Find the flaky test"
	mainTask := transcriptAssistant(false, "", messageOf(t, mainStartsTask))
	mainDone := transcriptAssistant(false, "", messageOf(t, mainAgain))
	subFile := transcriptAssistant(true, "a1b2c3d", messageOf(t, subAgentFinal))
	tests := []struct {
		name   string
		stream []string // what the stream reported before the transcript was read
		lines  []string
		want   map[string]int64 // tokens recovered, per agent
	}{
		{"the session alone is the main agent's", nil, []string{promptLine, mainTask, mainDone}, map[string]int64{"": 120 + 509}},
		{"a sub-agent's transcript is named by the Task its agentId is linked to",
			nil, []string{promptLine, mainTask, taskResultLine, mainDone, subFile}, map[string]int64{"": 120 + 509, named: 355}},
		{"the link may be only in the Task's result text",
			nil, []string{mainTask, taskResultTextOnly, subFile}, map[string]int64{"": 120, named: 355}},
		{"a sub-agent whose link was not seen is named by its agentId",
			nil, []string{subFile}, map[string]int64{"agent-a1b2c3d": 355}},
		{"a sidechain line without an agentId is still not the main agent's",
			nil, []string{transcriptAssistant(true, "", messageOf(t, subAgentFinal))}, map[string]int64{"sidechain": 355}},
		{"what the stream reported of a sub-agent is not recovered again, the rest is the sub-agent's",
			[]string{mainStartsTask, subAgentStream}, []string{mainTask, taskResultLine, subFile}, map[string]int64{named: 355 - 301}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewParser()
			for _, l := range tt.stream {
				if _, err := p.Feed([]byte(l)); err != nil {
					t.Fatal(err)
				}
			}
			got := map[string]int64{}
			for _, l := range tt.lines {
				for _, ev := range p.FeedTranscript([]byte(l)) {
					got[ev.Agent] += ev.Tokens()
				}
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("recovered tokens per agent %v, want %v", got, tt.want)
			}
		})
	}
}

// recover reads the sub-agents' transcripts beside the session's, after it.
func TestRecoverReadsTheSubAgentsTranscripts(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ".claude", "projects", "-ws")
	write := func(name string, lines ...string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "s.jsonl"), promptLine, transcriptAssistant(false, "", messageOf(t, mainStartsTask)), taskResultLine)
	write(filepath.Join(dir, "s", "subagents", "agent-a1b2c3d.jsonl"), transcriptAssistant(true, "a1b2c3d", messageOf(t, subAgentFinal)))
	write(filepath.Join(dir, "s", "subagents", "agent-a1b2c3d.meta.json"), `{"agentType":"general-purpose"}`)
	b, err := New(purser.BackendSpec{Type: "claude", Options: map[string]any{"command": "/bin/sh", "env": map[string]any{"HOME": home}}})
	if err != nil {
		t.Fatal(err)
	}
	p := NewParser()
	if _, err := p.Feed([]byte(`{"type":"system","subtype":"init","session_id":"s"}`)); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, ev := range b.recover("", p) {
		got[ev.Agent] += ev.Tokens()
	}
	if want := map[string]int64{"": 120, "general-purpose: Find the flaky test": 355}; !maps.Equal(got, want) {
		t.Errorf("recovered tokens per agent %v, want %v", got, want)
	}
}
