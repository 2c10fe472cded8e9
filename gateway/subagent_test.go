package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/gateway"
)

// spawnProvider is an Anthropic upstream like Claude Code's model: the
// main agent's first request is answered with Agent tool calls (Claude
// Code 2.1's spawn tool; its input streamed in input_json_delta pieces,
// or whole in a JSON reply), any other with text. Each reply's usage is
// 100 input tokens plus 10 per message, and 7 output tokens.
func spawnProvider(t *testing.T, stream bool, prompts ...string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		in := 100 + 10*len(req.Messages)
		spawn := len(req.Messages) == 1 && strings.Contains(string(req.Messages[0]), `"go"`)
		if !stream {
			w.Header().Set("Content-Type", "application/json")
			var content []string
			for i, p := range prompts {
				if spawn {
					content = append(content, fmt.Sprintf(`{"type":"tool_use","id":"toolu_%d","name":"Agent","input":{"description":"part %d","prompt":%q}}`, i, i+1, p))
				}
			}
			if !spawn {
				content = append(content, `{"type":"text","text":"ok"}`)
			}
			fmt.Fprintf(w, `{"type":"message","role":"assistant","content":[%s],"usage":{"input_tokens":%d,"output_tokens":7}}`, strings.Join(content, ","), in)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(data string) { fmt.Fprintf(w, "event: x\ndata: %s\n\n", data) }
		ev(fmt.Sprintf(`{"type":"message_start","message":{"model":"claude-sonnet-4-5","usage":{"input_tokens":%d,"output_tokens":1}}}`, in))
		if spawn {
			for i, p := range prompts {
				ev(fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":"toolu_%d","name":"Agent","input":{}}}`, i, i))
				input, _ := json.Marshal(map[string]string{"description": fmt.Sprintf("part %d", i+1), "prompt": p, "subagent_type": "Explore"})
				for j := 0; j < len(input); j += 5 {
					piece, _ := json.Marshal(string(input[j:min(j+5, len(input))]))
					ev(fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, i, piece))
				}
				ev(fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
			}
		} else {
			ev(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
			ev(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}`)
			ev(`{"type":"content_block_stop","index":0}`)
		}
		ev(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}`)
		ev(`{"type":"message_stop"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// whoAdmitter records who the door said sent each request, and what each
// request's grant was told it used.
type whoAdmitter struct {
	mu     sync.Mutex
	who    []int
	names  []string
	used   map[int]int64 // tokens per sub-agent, from Used
	refuse func(r purser.WireRequest) error
}

func (a *whoAdmitter) AdmitWire(_ context.Context, r purser.WireRequest) (purser.WireGrant, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.who = append(a.who, r.SubAgent)
	a.names = append(a.names, r.SubAgentName)
	if a.refuse != nil {
		if err := a.refuse(r); err != nil {
			return purser.WireGrant{}, err
		}
	}
	k := r.SubAgent
	return purser.WireGrant{Used: func(ev budget.UsageEvent) {
		a.mu.Lock()
		a.used[k] += ev.Tokens()
		a.mu.Unlock()
	}}, nil
}

// conversation is an Anthropic request body: the first user message as
// Claude Code sends a sub-agent's (reminders, then the prompt as the last
// text block), then n-1 more messages.
func conversation(first string, n int) string {
	msgs := []string{fmt.Sprintf(`{"role":"user","content":[{"type":"text","text":"<system-reminder>skills</system-reminder>"},{"type":"text","text":%q}]}`, first)}
	for i := 1; i < n; i++ {
		role := []string{"user", "assistant"}[i%2]
		msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":"turn %d"}`, role, i))
	}
	return `{"model":"claude-sonnet-4-5","max_tokens":1000,"stream":true,"messages":[` + strings.Join(msgs, ",") + `]}`
}

// The door reads the main agent's reply for its spawns (streamed in
// pieces, or whole) and tells, of every later request, which sub-agent
// sent it: a first request by the spawn's prompt, follow-ups by the same
// first message; the main agent's own requests are 0. A reply it books
// (the lane is the call's source of truth) is booked under the sub-agent,
// and each grant's Used gets its request's usage.
func TestDoorTellsWhichSubAgentSentEachRequest(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			up := spawnProvider(t, stream, "Find the flaky test.", "Read the docs.")
			adm := &whoAdmitter{used: map[int]int64{}}
			var mu sync.Mutex
			booked := map[string]int64{}
			l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL, Admit: adm,
				Report: func(ev budget.UsageEvent) { mu.Lock(); booked[ev.Agent] += ev.Tokens(); mu.Unlock() }})
			hdr := map[string]string{"x-api-key": l.Token(), "content-type": "application/json"}
			steps := []struct {
				body string
				want int
			}{
				{conversation("go", 1), 0},
				{conversation("Read the docs.", 1), 2},
				{conversation("Find the flaky test.", 1), 1},
				{conversation("Find the flaky test.", 3), 1},
				{conversation("go", 3), 0},
				{conversation("Read the docs.", 5), 2},
				{conversation("Some other prompt.", 1), 0},
			}
			for i, s := range steps {
				if code, body := do(t, "POST", l.URL()+"/v1/messages", hdr, s.body); code != 200 {
					t.Fatalf("request %d: %d %s", i, code, body)
				}
				if got := adm.who[i]; got != s.want {
					t.Errorf("request %d: sub-agent %d, want %d", i, got, s.want)
				}
			}
			kind := "Explore"
			if !stream {
				kind = "general-purpose" // the JSON reply's calls name no type
			}
			if adm.names[1] != kind+": part 2" || adm.names[2] != kind+": part 1" || adm.names[0] != "" {
				t.Errorf("names %q", adm.names)
			}
			// Input 100 + 10 a message, output 7: per sub-agent.
			want := map[int]int64{0: 117 + 137 + 117, 1: 117 + 137, 2: 117 + 157}
			for k, v := range want {
				if adm.used[k] != v {
					t.Errorf("Used: sub-agent %d spent %d tokens, want %d (%v)", k, adm.used[k], v, adm.used)
				}
			}
			l.Close()
			mu.Lock()
			defer mu.Unlock()
			if booked[""] != want[0] || booked[kind+": part 1"] != want[1] || booked[kind+": part 2"] != want[2] {
				t.Errorf("booked per agent %v, want main %d, part 1 %d, part 2 %d", booked, want[0], want[1], want[2])
			}
		})
	}
}

// A sub-agent's request the engine refuses reaches the agent in
// Anthropic's error shape, with a status no SDK retries, and says what
// the engine said — not "budget exhausted": the task goes on, and the
// parent reads it as its Agent tool's error.
func TestDoorPassesASubAgentRefusalAsItIs(t *testing.T) {
	up := spawnProvider(t, true, "one", "two")
	msg := "purser: sub-agent limit: 1 of maxSpawn 1 already spawned"
	adm := &whoAdmitter{used: map[int]int64{}, refuse: func(r purser.WireRequest) error {
		if r.SubAgent == 2 {
			return errors.New(msg)
		}
		return nil
	}}
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL, Admit: adm})
	hdr := map[string]string{"x-api-key": l.Token(), "content-type": "application/json"}
	for _, first := range []string{"go", "one"} {
		if code, body := do(t, "POST", l.URL()+"/v1/messages", hdr, conversation(first, 1)); code != 200 {
			t.Fatalf("%s: %d %s", first, code, body)
		}
	}
	code, body := do(t, "POST", l.URL()+"/v1/messages", hdr, conversation("two", 1))
	if code != http.StatusPaymentRequired {
		t.Fatalf("spawn 2: %d %s, want 402", code, body)
	}
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Type != "error" || e.Error.Type != "billing_error" || e.Error.Message != msg {
		t.Errorf("refusal body %s (%v), want billing_error %q", body, err, msg)
	}
}

// Without a spawn seen, the door reads no request for one: every request
// is the main agent's, even one whose first message looks like a prompt.
func TestDoorWithNoSpawnHasOnlyTheMainAgent(t *testing.T) {
	up := spawnProvider(t, true)
	adm := &whoAdmitter{used: map[int]int64{}}
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL, Admit: adm})
	hdr := map[string]string{"x-api-key": l.Token(), "content-type": "application/json"}
	for _, first := range []string{"go", "one", "go"} {
		if code, body := do(t, "POST", l.URL()+"/v1/messages", hdr, conversation(first, 1)); code != 200 {
			t.Fatalf("%s: %d %s", first, code, body)
		}
	}
	for i, k := range adm.who {
		if k != 0 {
			t.Errorf("request %d: sub-agent %d with no spawn", i, k)
		}
	}
}
