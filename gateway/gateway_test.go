package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/backend/meter"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/gateway"
)

const realKey = "sk-real-provider-key-0123456789"

// seen is what an httptest provider saw of the requests that reached it.
type seen struct {
	mu   sync.Mutex
	reqs []seenReq
}

type seenReq struct {
	path, query string
	header      http.Header
	body        string
}

func (s *seen) last(t *testing.T) seenReq {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("no request reached the provider")
	}
	return s.reqs[len(s.reqs)-1]
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// provider is an httptest upstream that records each request and answers
// with a small JSON reply carrying usage.
func provider(t *testing.T, reply string) (*httptest.Server, *seen) {
	s := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, seenReq{path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: string(b)})
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply)
	}))
	t.Cleanup(srv.Close)
	return srv, s
}

func open(t *testing.T, ctx context.Context, c gateway.LaneConfig) *gateway.Lane {
	t.Helper()
	if c.Key == (gateway.Key{}) {
		t.Setenv("PURSER_TEST_REAL_KEY", realKey)
		c.Key = gateway.Key{Env: "PURSER_TEST_REAL_KEY"}
	}
	l, err := gateway.Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func do(t *testing.T, method, url string, header map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The agent holds a token, never the key: each place a protocol carries a
// key takes the token, the provider gets the real key in its own header and
// never the token; a wrong or missing key, an unknown route, a foreign
// Host are refused by name, before anything reaches the provider.
func TestDoorKeysRoutesAndHost(t *testing.T) {
	anth, anthSeen := provider(t, `{"model":"m","usage":{"input_tokens":1,"output_tokens":1}}`)
	gem, gemSeen := provider(t, `{"candidates":[{"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1}}`)
	oai, oaiSeen := provider(t, `{"model":"m","usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	a := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: anth.URL})
	g := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Gemini, Upstream: gem.URL + "/v1beta"})
	o := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.OpenAIChat, Upstream: oai.URL + "/v1"})
	if a.Token() == "" || strings.Contains(a.Token(), realKey) || a.Token() == g.Token() {
		t.Fatalf("tokens %q, %q: want distinct random tokens", a.Token(), g.Token())
	}

	for _, tc := range []struct {
		name   string
		lane   *gateway.Lane
		seen   *seen
		path   string
		header map[string]string
		where  string // the provider's header with the real key
	}{
		{"x-api-key", a, anthSeen, "/v1/messages", map[string]string{"x-api-key": a.Token()}, "X-Api-Key"},
		{"bearer", o, oaiSeen, "/v1/chat/completions", map[string]string{"Authorization": "Bearer " + o.Token()}, "Authorization"},
		{"x-goog-api-key", g, gemSeen, "/v1beta/models/gemini-2.5-pro:generateContent", map[string]string{"x-goog-api-key": g.Token()}, "X-Goog-Api-Key"},
		{"query key", g, gemSeen, "/v1beta/models/gemini-2.5-pro:generateContent?key=" + g.Token() + "&alt=json", nil, "X-Goog-Api-Key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := do(t, "POST", tc.lane.URL()+tc.path, tc.header, `{"model":"m","max_tokens":5}`)
			if status != 200 {
				t.Fatalf("status %d %s", status, body)
			}
			got := tc.seen.last(t)
			if v := got.header.Get(tc.where); !strings.Contains(v, realKey) {
				t.Errorf("provider's %s = %q; want the real key", tc.where, v)
			}
			for k, vs := range got.header {
				for _, v := range vs {
					if strings.Contains(v, tc.lane.Token()) {
						t.Errorf("the token reached the provider in %s", k)
					}
				}
			}
			if strings.Contains(got.query, tc.lane.Token()) || strings.Contains(got.query, "key=") {
				t.Errorf("the provider's query %q carries a key", got.query)
			}
			if strings.Contains(got.path, "/v1beta/v1beta") || strings.Contains(got.path, "/v1/v1") {
				t.Errorf("the provider's path %q repeats its version", got.path)
			}
		})
	}

	before := anthSeen.count()
	for _, tc := range []struct {
		name, method, path string
		header             map[string]string
		status             int
		says               string
	}{
		{"no key", "POST", "/v1/messages", nil, 401, "token"},
		{"the real key", "POST", "/v1/messages", map[string]string{"x-api-key": realKey}, 401, "token"},
		{"another lane's token", "POST", "/v1/messages", map[string]string{"x-api-key": g.Token()}, 401, "token"},
		{"unknown route", "POST", "/v1/files", map[string]string{"x-api-key": a.Token()}, 404, "does not pass POST /v1/files"},
		{"another protocol", "POST", "/v1/chat/completions", map[string]string{"x-api-key": a.Token()}, 404, "speaks anthropic"},
		{"foreign host", "POST", "/v1/messages", map[string]string{"x-api-key": a.Token(), "Host": "evil.example:80"}, 421, "loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := do(t, tc.method, a.URL()+tc.path, tc.header, `{"model":"m","max_tokens":5}`)
			if status != tc.status || !strings.Contains(body, tc.says) || !strings.Contains(body, `"type":"error"`) {
				t.Errorf("status %d %s; want %d in Anthropic's error shape saying %q", status, body, tc.status, tc.says)
			}
		})
	}
	if n := anthSeen.count(); n != before {
		t.Errorf("%d refused requests reached the provider", n-before)
	}
	if status, _ := do(t, "HEAD", a.URL()+"/", nil, ""); status != 200 {
		t.Errorf("HEAD / = %d; want 200 (Claude Code's check)", status)
	}
	_ = a.Close()
	if _, err := http.Post(a.URL()+"/v1/messages", "application/json", strings.NewReader("{}")); err == nil {
		t.Error("a closed lane still answers: its token must die with it")
	}
}

// admitter is a scripted purser.WireAdmitter.
type admitter struct {
	mu       sync.Mutex
	got      []purser.WireRequest
	grant    purser.WireGrant
	refuse   error
	released atomic.Int32
}

func (a *admitter) AdmitWire(_ context.Context, r purser.WireRequest) (purser.WireGrant, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, r)
	if a.refuse != nil {
		return purser.WireGrant{}, a.refuse
	}
	g := a.grant
	g.Release = func() { a.released.Add(1) }
	return g, nil
}

// Each request is admitted before it is forwarded, with its input counted
// and its output bound read per protocol; the grant's model and clamped
// bound are what the provider gets (a bound added where the request had
// none), every other byte unchanged; count_tokens passes unadmitted; the
// grant is released once the reply is over.
func TestDoorAdmitsAndRewritesEachRequest(t *testing.T) {
	for _, tc := range []struct {
		name, protocol, path, body string
		maxOut                     int64
		want                       string // in the provider's body or path
	}{
		{"anthropic", gateway.Anthropic, "/v1/messages", `{"model":"big","max_tokens":4096,"messages":[{"role":"user","content":"hi"}]}`, 4096,
			`{"model":"small","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
		{"anthropic thinking lowered", gateway.Anthropic, "/v1/messages", `{"model":"big","max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":16000}}`, 32000,
			`{"model":"small","max_tokens":100,"thinking":{"type":"disabled"}}`},
		{"chat max_completion_tokens", gateway.OpenAIChat, "/v1/chat/completions", `{"model":"big","messages":[],"max_completion_tokens":9000}`, 9000,
			`{"model":"small","messages":[],"max_completion_tokens":100}`},
		{"chat max_tokens", gateway.OpenAIChat, "/v1/chat/completions", `{"model":"big","max_tokens":9000,"messages":[]}`, 9000,
			`{"model":"small","max_tokens":100,"messages":[]}`},
		{"chat none", gateway.OpenAIChat, "/v1/chat/completions", `{"model":"big","messages":[]}`, 0,
			`{"model":"small","messages":[],"max_completion_tokens":100}`},
		{"responses none", gateway.OpenAIResponses, "/v1/responses", `{"model":"big", "input":"hi"}`, 0,
			`{"model":"small", "input":"hi","max_output_tokens":100}`},
		{"gemini", gateway.Gemini, "/v1beta/models/big:generateContent", `{"contents":[],"generationConfig":{"temperature":0,"maxOutputTokens":8192}}`, 8192,
			`{"contents":[],"generationConfig":{"temperature":0,"maxOutputTokens":100}}`},
		{"gemini none", gateway.Gemini, "/v1beta/models/big:generateContent", `{"contents":[]}`, 0,
			`{"contents":[],"generationConfig":{"maxOutputTokens":100}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, s := provider(t, `{}`)
			adm := &admitter{grant: purser.WireGrant{Model: "small", MaxOutputTokens: 100}}
			l := open(t, context.Background(), gateway.LaneConfig{Protocol: tc.protocol, Upstream: up.URL, Admit: adm})
			status, body := do(t, "POST", l.URL()+tc.path, map[string]string{"x-api-key": l.Token()}, tc.body)
			if status != 200 {
				t.Fatalf("status %d %s", status, body)
			}
			got := s.last(t)
			if got.body != tc.want {
				t.Errorf("the provider got\n%s\nwant\n%s", got.body, tc.want)
			}
			if tc.protocol == gateway.Gemini && !strings.Contains(got.path, "/models/small:") {
				t.Errorf("the provider's path %s; want the granted model in it", got.path)
			}
			if len(adm.got) != 1 {
				t.Fatalf("%d admissions; want 1", len(adm.got))
			}
			r := adm.got[0]
			if r.Model != "big" || r.MaxOutputTokens != tc.maxOut || r.InputTokens != int64((len(tc.body)+3)/4) || r.Protocol != tc.protocol {
				t.Errorf("admitted %+v; want model big, max output %d, input %d", r, tc.maxOut, (len(tc.body)+3)/4)
			}
			_ = l.Close()
			if n := adm.released.Load(); n != 1 {
				t.Errorf("released %d times; want once", n)
			}
		})
	}

	t.Run("count_tokens unadmitted", func(t *testing.T) {
		up, _ := provider(t, `{"input_tokens":3}`)
		adm := &admitter{refuse: errors.New("no")}
		l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL, Admit: adm})
		if status, body := do(t, "POST", l.URL()+"/v1/messages/count_tokens", map[string]string{"x-api-key": l.Token()}, `{"model":"m"}`); status != 200 {
			t.Fatalf("count_tokens: %d %s", status, body)
		}
		if len(adm.got) != 0 {
			t.Errorf("count_tokens was admitted: %+v", adm.got)
		}
	})
}

// A request the budget refuses never reaches the provider: the agent gets
// a 402 (no SDK retries it) in its provider's own error shape, saying
// "purser: budget exhausted (…)".
func TestDoorRefusesInTheProvidersShape(t *testing.T) {
	exhausted := &budget.BudgetExhaustedError{Scope: budget.ScopeTask, Metric: budget.Money}
	for _, tc := range []struct {
		protocol, path string
		shape          func(map[string]any) string
	}{
		{gateway.Anthropic, "/v1/messages", func(v map[string]any) string {
			e, _ := v["error"].(map[string]any)
			if v["type"] != "error" || e["type"] != "billing_error" {
				return ""
			}
			m, _ := e["message"].(string)
			return m
		}},
		{gateway.OpenAIResponses, "/v1/responses", func(v map[string]any) string {
			e, _ := v["error"].(map[string]any)
			m, _ := e["message"].(string)
			return m
		}},
		{gateway.Gemini, "/v1beta/models/g:streamGenerateContent", func(v map[string]any) string {
			e, _ := v["error"].(map[string]any)
			if e["status"] != "FAILED_PRECONDITION" {
				return ""
			}
			m, _ := e["message"].(string)
			return m
		}},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			up, s := provider(t, `{}`)
			l := open(t, context.Background(), gateway.LaneConfig{Protocol: tc.protocol, Upstream: up.URL, Admit: &admitter{refuse: exhausted}})
			status, body := do(t, "POST", l.URL()+tc.path, map[string]string{"x-api-key": l.Token()}, `{"model":"m"}`)
			var v map[string]any
			_ = json.Unmarshal([]byte(body), &v)
			if msg := tc.shape(v); status != 402 || !strings.HasPrefix(msg, "purser: budget exhausted (") {
				t.Errorf("status %d %s; want 402 in the provider's shape with purser's message", status, body)
			}
			if s.count() != 0 {
				t.Error("a refused request reached the provider")
			}
		})
	}
}

// Every reply's usage, streamed or whole, of every protocol, is reported
// to the lane's UsageFunc and journalled, with the mock's fixed figures.
func TestDoorBooksUsageOfEveryProtocol(t *testing.T) {
	mock := backendtest.StartMock(t)
	const prompt = "Create mock_out.txt. MOCK_TOOL"
	anthropic := budget.UsageEvent{Model: "claude-sonnet-4-5", InputTokens: 5500, CacheReadTokens: 4000, CacheWriteTokens: 300, OutputTokens: 60}
	openai := budget.UsageEvent{Model: "gpt-5.5", InputTokens: 5200, CacheReadTokens: 4000, OutputTokens: 60, ReasoningTokens: 20}
	gemini := budget.UsageEvent{Model: "gemini-2.5-pro", InputTokens: 5200, CacheReadTokens: 4000, OutputTokens: 80, ReasoningTokens: 20}
	for _, tc := range []struct {
		name, protocol, path, body string
		want                       budget.UsageEvent
	}{
		{"anthropic stream", gateway.Anthropic, "/v1/messages", `{"model":"claude-sonnet-4-5","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"` + prompt + `"}],"tools":[{"name":"Bash","input_schema":{}}]}`, anthropic},
		{"responses stream", gateway.OpenAIResponses, "/v1/responses", `{"model":"gpt-5.5","stream":true,"input":"` + prompt + `","tools":[{"type":"function","name":"shell"}]}`, openai},
		{"chat stream", gateway.OpenAIChat, "/v1/chat/completions", `{"model":"gpt-5.5","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"` + prompt + `"}],"tools":[{"type":"function","function":{"name":"shell"}}]}`, openai},
		{"gemini sse", gateway.Gemini, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"` + prompt + `"}]}],"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}]}`, gemini},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []budget.UsageEvent
			journal := filepath.Join(t.TempDir(), "wire.jsonl")
			l := open(t, context.Background(), gateway.LaneConfig{Protocol: tc.protocol, Upstream: mock, Journal: journal,
				Report: func(ev budget.UsageEvent) { mu.Lock(); got = append(got, ev); mu.Unlock() }})
			status, body := do(t, "POST", l.URL()+tc.path, map[string]string{"Authorization": "Bearer " + l.Token()}, tc.body)
			if status != 200 {
				t.Fatalf("status %d %s", status, body)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			j, err := meter.Read(journal)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != tc.want || len(j) != 1 || j[0] != tc.want {
				t.Errorf("reported %+v, journalled %+v; want %+v once in each", got, j, tc.want)
			}
		})
	}
}

// slowStream is a provider that sends an event, then waits for release
// (or the request's end) before the next.
func slowStream(t *testing.T, events []string, hold <-chan struct{}) (*httptest.Server, <-chan struct{}) {
	ended := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer once.Do(func() { close(ended) })
		w.Header().Set("Content-Type", "text/event-stream")
		for i, e := range events {
			_, _ = io.WriteString(w, e)
			w.(http.Flusher).Flush()
			if i == 0 {
				select {
				case <-hold:
				case <-r.Context().Done():
					return
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, ended
}

// The lane's end (the engine cancels it at the HARD cap) cuts a reply in
// flight: the agent's stream ends at once, told why, and the provider's
// request is cancelled.
func TestDoorCutsMidStreamWhenTheLaneEnds(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	up, upstreamEnded := slowStream(t, []string{"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":10}}}\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":5}}\n\n"}, hold)
	ctx, cancel := context.WithCancelCause(context.Background())
	var mu sync.Mutex
	var booked []budget.UsageEvent
	l := open(t, ctx, gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL,
		Report: func(ev budget.UsageEvent) { mu.Lock(); booked = append(booked, ev); mu.Unlock() }})
	req, _ := http.NewRequest("POST", l.URL()+"/v1/messages", strings.NewReader(`{"model":"m","stream":true,"max_tokens":10}`))
	req.Header.Set("x-api-key", l.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if line, _ := rd.ReadString('\n'); !strings.HasPrefix(line, "event: message_start") {
		t.Fatalf("first line %q", line)
	}
	cancel(&budget.BudgetExhaustedError{Scope: budget.ScopeTask, Metric: budget.Tokens})
	done := make(chan string, 1)
	go func() { rest, _ := io.ReadAll(rd); done <- string(rest) }()
	select {
	case rest := <-done:
		if !strings.Contains(rest, "purser: budget exhausted (") || strings.Contains(rest, "message_delta") {
			t.Errorf("after the cut the agent read %q; want purser's error event and nothing of the rest", rest)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent's stream did not end when the lane did")
	}
	select {
	case <-upstreamEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the provider's request was not cancelled")
	}
	if st := l.Stats(); st.Cut != 1 {
		t.Errorf("stats %+v; want one cut", st)
	}
	// The provider bills the input of a reply it started: message_start's.
	_ = l.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(booked) != 1 || booked[0].InputTokens != 10 || booked[0].OutputTokens != 0 {
		t.Errorf("booked %+v for the cut reply; want message_start's 10 input tokens", booked)
	}
}

// A cut reply of a protocol that says its usage only at the end is booked
// at the door's count of its input.
func TestDoorBooksTheInputOfACutReply(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	up, _ := slowStream(t, []string{"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n", "data: [DONE]\n\n"}, hold)
	ctx, cancel := context.WithCancel(context.Background())
	booked := make(chan budget.UsageEvent, 4)
	l := open(t, ctx, gateway.LaneConfig{Protocol: gateway.OpenAIChat, Upstream: up.URL, Report: func(ev budget.UsageEvent) { booked <- ev }})
	body := `{"model":"gpt-x","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("y", 396) + `"}]}`
	req, _ := http.NewRequest("POST", l.URL()+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+l.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if line, _ := bufio.NewReader(resp.Body).ReadString('\n'); !strings.HasPrefix(line, "data:") {
		t.Fatalf("first line %q", line)
	}
	cancel()
	select {
	case ev := <-booked:
		if want := int64((len(body) + 3) / 4); ev.InputTokens != want || ev.Model != "gpt-x" {
			t.Errorf("booked %+v; want %d input tokens of gpt-x", ev, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cut reply was not booked")
	}
}

// On a CLI's lane (no Report: the CLI's own output is the call's source of
// truth), the same cut reply is written to the wire journal at the door's
// count, under the request's model: the call's reconciliation books it,
// where the CLI never saw it (Codex cut after response.created).
func TestDoorJournalsTheInputOfACutReplyOnACLILane(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	up, _ := slowStream(t, []string{"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n", "data: [DONE]\n\n"}, hold)
	ctx, cancel := context.WithCancel(context.Background())
	journal := filepath.Join(t.TempDir(), "wire.jsonl")
	l := open(t, ctx, gateway.LaneConfig{Protocol: gateway.OpenAIChat, Upstream: up.URL, Journal: journal})
	body := `{"model":"gpt-x","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("y", 396) + `"}]}`
	req, _ := http.NewRequest("POST", l.URL()+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+l.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if line, _ := bufio.NewReader(resp.Body).ReadString('\n'); !strings.HasPrefix(line, "data:") {
		t.Fatalf("first line %q", line)
	}
	cancel()
	want := int64((len(body) + 3) / 4)
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, err := meter.Read(journal)
		if err == nil && len(evs) == 1 {
			if evs[0].InputTokens != want || evs[0].Model != "gpt-x" {
				t.Errorf("journalled %+v; want %d input tokens of gpt-x", evs[0], want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cut reply was not journalled: %v %+v", err, evs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The door reads the provider at its own pace: a reply the agent does not
// read yet (a slow CLI) is booked when the provider finishes it, not when
// the agent reads it; and an agent that hangs up mid-reply does not lose
// the reply's usage.
func TestDoorBooksBeforeTheAgentReads(t *testing.T) {
	filler := strings.Repeat("x", 512<<10)
	up, _ := provider(t, `{"model":"m","content":[{"text":"`+filler+`"}],"usage":{"input_tokens":7,"output_tokens":3}}`)
	booked := make(chan budget.UsageEvent, 2)
	journal := filepath.Join(t.TempDir(), "wire.jsonl")
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL, Journal: journal,
		Report: func(ev budget.UsageEvent) { booked <- ev }})
	// A raw connection that sends the request and reads nothing.
	conn, err := net.Dial("tcp", strings.TrimPrefix(l.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	body := `{"model":"m","max_tokens":5}`
	_, _ = io.WriteString(conn, "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: "+l.Token()+
		"\r\nContent-Type: application/json\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body)
	select {
	case ev := <-booked:
		if ev.InputTokens != 7 || ev.OutputTokens != 3 {
			t.Errorf("booked %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reply was not booked while the agent did not read it")
	}
	if j, err := meter.Read(journal); err != nil || len(j) != 1 {
		t.Errorf("journal %+v %v; want the reply in it before the agent read it", j, err)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// A boxed agent reaches the door by a unix socket (the box's door relay).
func TestDoorServesAUnixSocket(t *testing.T) {
	up, _ := provider(t, `{"model":"m","usage":{"input_tokens":1,"output_tokens":1}}`)
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL})
	sock := filepath.Join(t.TempDir(), "door.sock")
	if err := l.ServeUnix(sock); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, _ := http.NewRequest("POST", "http://127.0.0.1:4141/v1/messages", strings.NewReader(`{"model":"m","max_tokens":1}`))
	req.Header.Set("x-api-key", l.Token())
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// A provider that cannot be reached is said as the provider's 502, with
// the lane's LastError for the backend to classify; no key in either.
func TestDoorSaysAnUnreachableProvider(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Gemini, Upstream: "http://" + addr})
	status, body := do(t, "POST", l.URL()+"/v1beta/models/g:generateContent?key="+l.Token(), nil, `{}`)
	if status != 502 || !strings.Contains(body, "could not be reached") || !strings.Contains(body, `"status":"UNAVAILABLE"`) {
		t.Errorf("status %d %s; want Gemini's 502 UNAVAILABLE", status, body)
	}
	le := l.LastError()
	if le == nil {
		t.Fatal("LastError is nil")
	}
	for _, s := range []string{body, le.Error()} {
		if strings.Contains(s, realKey) || strings.Contains(s, l.Token()) {
			t.Errorf("a key is in %q", s)
		}
	}
}

// Claude Code's extended thinking under a clamped max_tokens: its budget
// is lowered below the bound (the API refuses a budget at or over it).
func TestDoorKeepsThinkingUnderTheClamp(t *testing.T) {
	up, s := provider(t, `{}`)
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL,
		Admit: &admitter{grant: purser.WireGrant{MaxOutputTokens: 5000}}})
	do(t, "POST", l.URL()+"/v1/messages", map[string]string{"x-api-key": l.Token()},
		`{"model":"m","max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":16000},"messages":[]}`)
	if got, want := s.last(t).body, `{"model":"m","max_tokens":5000,"thinking":{"type":"enabled","budget_tokens":4999},"messages":[]}`; got != want {
		t.Errorf("the provider got\n%s\nwant\n%s", got, want)
	}
}
