package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/gateway"
)

const wrapText = "Purser: the budget is nearly spent. Summarise what is done and what remains."

// replier is an httptest upstream answering every request with one reply
// of a content type, recording the bodies it got.
func replier(t *testing.T, status int, ctype, reply string) (*httptest.Server, *seen) {
	s := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, seenReq{path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: string(b)})
		s.mu.Unlock()
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		for _, line := range strings.SplitAfter(reply, "\n") { // in pieces, as a stream comes
			_, _ = io.WriteString(w, line)
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, s
}

// wrapDone records what WrapUpDone was handed, and how often.
type wrapDone struct {
	mu    sync.Mutex
	texts []string
}

func (d *wrapDone) done(s string) { d.mu.Lock(); d.texts = append(d.texts, s); d.mu.Unlock() }

func (d *wrapDone) got() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.texts...)
}

// lastUserText is the text of the last user turn of a forwarded body, per
// protocol, and whether that turn is the body's last.
func lastUserText(t *testing.T, protocol, body string) string {
	t.Helper()
	var v struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Input    json.RawMessage `json:"input"`
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("the provider got invalid JSON %s: %v", body, err)
	}
	switch protocol {
	case gateway.Anthropic, gateway.OpenAIChat:
		m := v.Messages[len(v.Messages)-1]
		if m.Role != "user" {
			t.Fatalf("the last message is %s's: %s", m.Role, body)
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			return s
		}
		var blocks []struct{ Type, Text string }
		_ = json.Unmarshal(m.Content, &blocks)
		b := blocks[len(blocks)-1]
		if b.Type != "text" {
			t.Fatalf("the last block is %s: %s", b.Type, body)
		}
		return b.Text
	case gateway.OpenAIResponses:
		var items []struct {
			Role    string
			Content []struct{ Type, Text string }
		}
		_ = json.Unmarshal(v.Input, &items)
		it := items[len(items)-1]
		if it.Role != "user" || it.Content[0].Type != "input_text" {
			t.Fatalf("the last input item is %+v", it)
		}
		return it.Content[0].Text
	default:
		c := v.Contents[len(v.Contents)-1]
		if c.Role != "user" {
			t.Fatalf("the last content is %s's: %s", c.Role, body)
		}
		return c.Parts[len(c.Parts)-1].Text
	}
}

// The wrap-up turn: the provider gets the agent's request with no tools
// and the instruction as its last user message, bounded; the agent gets
// the reply unchanged; WrapUpDone gets the reply's text once, streamed or
// not, in every protocol.
func TestWrapUpTurnOfEveryProtocol(t *testing.T) {
	const said = "Done: the parser. Remains: the docs."
	anthropicSSE := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Done: the parser.\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" Remains: the docs.\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	chatSSE := "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Done: the parser.\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" Remains: the docs.\"}}]}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":9}}\n\ndata: [DONE]\n\n"
	responsesSSE := "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Done: the parser.\"}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\" Remains: the docs.\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":10,\"output_tokens\":9}}}\n\n"
	geminiSSE := "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"thinking…\",\"thought\":true},{\"text\":\"Done: the parser.\"}]}}]}\r\n\r\n" +
		"data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\" Remains: the docs.\"}]}}],\"usageMetadata\":{\"promptTokenCount\":10,\"candidatesTokenCount\":9}}\r\n\r\n"
	for _, tc := range []struct {
		name, protocol, path, body string
		ctype, reply               string
	}{
		{"anthropic stream", gateway.Anthropic, "/v1/messages",
			`{"model":"m","max_tokens":9000,"stream":true,"tools":[{"name":"bash","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"},` +
				`"messages":[{"role":"user","content":"fix it"},{"role":"assistant","content":"on it"}]}`,
			"text/event-stream", anthropicSSE},
		{"anthropic json", gateway.Anthropic, "/v1/messages",
			`{"model":"m","max_tokens":9000,"tools":[{"name":"bash","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"fix it"}]}`,
			"application/json", `{"content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"` + said + `"}],"usage":{"input_tokens":10,"output_tokens":9}}`},
		{"chat stream", gateway.OpenAIChat, "/v1/chat/completions",
			`{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"bash"}}],"tool_choice":"auto","parallel_tool_calls":true,` +
				`"functions":[{"name":"old"}],"messages":[{"role":"system","content":"sys"},{"role":"user","content":"fix it"}]}`,
			"text/event-stream", chatSSE},
		{"chat json", gateway.OpenAIChat, "/v1/chat/completions",
			`{"model":"m","tools":[{"type":"function","function":{"name":"bash"}}],"messages":[{"role":"user","content":"fix it"}]}`,
			"application/json", `{"choices":[{"message":{"role":"assistant","content":"` + said + `"}}],"usage":{"prompt_tokens":10,"completion_tokens":9}}`},
		{"responses stream", gateway.OpenAIResponses, "/v1/responses",
			`{"model":"m","stream":true,"tools":[{"type":"function","name":"bash"}],"tool_choice":"auto","input":[{"role":"user","content":"fix it"}]}`,
			"text/event-stream", responsesSSE},
		{"responses json", gateway.OpenAIResponses, "/v1/responses",
			`{"model":"m","tools":[{"type":"function","name":"bash"}],"input":[{"role":"user","content":"fix it"}]}`,
			"application/json", `{"output":[{"type":"reasoning","content":[]},{"type":"message","content":[{"type":"output_text","text":"` + said + `"}]}],"usage":{"input_tokens":10,"output_tokens":9}}`},
		{"gemini stream", gateway.Gemini, "/v1beta/models/g:streamGenerateContent?alt=sse",
			`{"tools":[{"functionDeclarations":[{"name":"bash"}]}],"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}},"contents":[{"role":"user","parts":[{"text":"fix it"}]}]}`,
			"text/event-stream", geminiSSE},
		{"gemini json", gateway.Gemini, "/v1beta/models/g:generateContent",
			`{"tools":[{"functionDeclarations":[{"name":"bash"}]}],"contents":[{"role":"user","parts":[{"text":"fix it"}]},{"role":"model","parts":[{"text":"on it"}]}]}`,
			"application/json", `{"candidates":[{"content":{"role":"model","parts":[{"text":"` + said + `"}]}}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":9}}`},
		{"gemini json list", gateway.Gemini, "/v1beta/models/g:streamGenerateContent",
			`{"tools":[{"functionDeclarations":[{"name":"bash"}]}],"contents":[{"role":"user","parts":[{"text":"fix it"}]}]}`,
			"application/json", `[{"candidates":[{"content":{"role":"model","parts":[{"text":"Done: the parser."}]}}]},` +
				`{"candidates":[{"content":{"role":"model","parts":[{"text":" Remains: the docs."}]}}]}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, s := replier(t, 200, tc.ctype, tc.reply)
			var d wrapDone
			a := &admitter{grant: purser.WireGrant{WrapUp: wrapText, WrapUpDone: d.done, MaxOutputTokens: 2048}}
			l := open(t, context.Background(), gateway.LaneConfig{Protocol: tc.protocol, Upstream: up.URL, Admit: a})
			status, reply := do(t, "POST", l.URL()+tc.path, map[string]string{"x-api-key": l.Token()}, tc.body)
			if status != 200 || reply != tc.reply {
				t.Fatalf("the agent got %d %q; want the reply unchanged", status, reply)
			}
			got := s.last(t).body
			var fields map[string]json.RawMessage
			if err := json.Unmarshal([]byte(got), &fields); err != nil {
				t.Fatalf("the provider got invalid JSON %s", got)
			}
			for _, f := range []string{"tools", "tool_choice", "functions", "parallel_tool_calls", "toolConfig"} {
				if _, ok := fields[f]; ok {
					t.Errorf("the provider got %s: %s", f, got)
				}
			}
			if txt := lastUserText(t, tc.protocol, got); !strings.HasSuffix(txt, wrapText) {
				t.Errorf("the last user text is %q; want the wrap-up instruction", txt)
			}
			if !strings.Contains(got, "fix it") {
				t.Errorf("the agent's conversation is gone: %s", got)
			}
			if !strings.Contains(got, "2048") {
				t.Errorf("the wrap-up is not bounded by its grant: %s", got)
			}
			if texts := d.got(); len(texts) != 1 || texts[0] != said {
				t.Errorf("WrapUpDone got %q; want %q once", texts, said)
			}
			_ = l.Close() // waits for the reply's pump, which releases
			if a.released.Load() != 1 {
				t.Errorf("released %d times; want 1", a.released.Load())
			}
		})
	}
}

// Anthropic refuses tool_use and tool_result blocks in a request with no
// tools: the wrap-up turn says them as text, so the conversation stays
// valid, and the instruction comes after the last tool result.
func TestWrapUpTurnKeepsAnthropicToolHistoryValid(t *testing.T) {
	up, s := replier(t, 200, "application/json", `{"content":[{"type":"text","text":"ok"}]}`)
	var d wrapDone
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL,
		Admit: &admitter{grant: purser.WireGrant{WrapUp: wrapText, WrapUpDone: d.done}}})
	body := `{"model":"m","max_tokens":100,"tools":[{"name":"bash","input_schema":{"type":"object"}}],"messages":[` +
		`{"role":"user","content":"fix it"},` +
		`{"role":"assistant","content":[{"type":"text","text":"running"},{"type":"tool_use","id":"t1","name":"bash","input":{"cmd":"go test"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"FAIL parser_test.go"}]}]}]}`
	if status, reply := do(t, "POST", l.URL()+"/v1/messages", map[string]string{"x-api-key": l.Token()}, body); status != 200 {
		t.Fatalf("status %d %s", status, reply)
	}
	got := s.last(t).body
	if strings.Contains(got, `"tool_use"`) || strings.Contains(got, `"tool_result"`) || strings.Contains(got, `"tools"`) {
		t.Errorf("the provider got tool blocks without tools: %s", got)
	}
	for _, want := range []string{"go test", "FAIL parser_test.go", "bash"} {
		if !strings.Contains(got, want) {
			t.Errorf("the provider lost %q of the tool history: %s", want, got)
		}
	}
	var v struct {
		Messages []struct {
			Role    string
			Content json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(got), &v); err != nil || len(v.Messages) != 3 {
		t.Fatalf("the provider got %s (%v); want the three messages", got, err)
	}
	var last []struct{ Type, Text string }
	_ = json.Unmarshal(v.Messages[2].Content, &last)
	if len(last) != 2 || last[0].Type != "text" || !strings.Contains(last[0].Text, "FAIL") || last[1].Text != wrapText {
		t.Errorf("the last user message is %+v; want the result as text, then the instruction", last)
	}
	if texts := d.got(); len(texts) != 1 || texts[0] != "ok" {
		t.Errorf("WrapUpDone got %q", texts)
	}
}

// A wrap-up turn that fails — the provider's error, or a provider not
// reached — still ends: WrapUpDone gets "" once, the agent the error.
func TestWrapUpTurnThatFailsSaysNothing(t *testing.T) {
	up, _ := replier(t, 500, "application/json", `{"type":"error","error":{"type":"api_error","message":"boom"}}`)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for name, url := range map[string]string{"error": up.URL, "unreachable": down.URL} {
		t.Run(name, func(t *testing.T) {
			var d wrapDone
			a := &admitter{grant: purser.WireGrant{WrapUp: wrapText, WrapUpDone: d.done}}
			l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: url, Admit: a})
			status, _ := do(t, "POST", l.URL()+"/v1/messages", map[string]string{"x-api-key": l.Token()},
				`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"fix it"}]}`)
			if status == 200 {
				t.Fatal("the failed wrap-up reached the agent as a success")
			}
			if texts := d.got(); len(texts) != 1 || texts[0] != "" {
				t.Errorf("WrapUpDone got %q; want \"\" once", texts)
			}
		})
	}
}
