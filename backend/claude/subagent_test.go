package claude

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
