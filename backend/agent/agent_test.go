package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/agent"
	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/budget"
)

const realKey = "sk-ant-real-key-held-by-purser-0123456789"

type usage struct {
	mu  sync.Mutex
	evs []budget.UsageEvent
}

func (u *usage) report(ev budget.UsageEvent) { u.mu.Lock(); u.evs = append(u.evs, ev); u.mu.Unlock() }

func (u *usage) sum() budget.UsageEvent {
	u.mu.Lock()
	defer u.mu.Unlock()
	var s budget.UsageEvent
	for _, ev := range u.evs {
		s.InputTokens += ev.InputTokens
		s.OutputTokens += ev.OutputTokens
		s.CacheReadTokens += ev.CacheReadTokens
		s.CacheWriteTokens += ev.CacheWriteTokens
	}
	return s
}

func newAgent(t *testing.T, upstream string, extra map[string]any) *agent.Backend {
	t.Helper()
	t.Setenv("PURSER_TEST_ANTHROPIC_KEY", realKey)
	script, _ := filepath.Abs("testdata/agent.py")
	opts := map[string]any{"wire": "anthropic", "command": []any{script, "{prompt}"}, "model": "claude-sonnet-4-5",
		"upstream": upstream, "key": map[string]any{"env": "PURSER_TEST_ANTHROPIC_KEY"}}
	for k, v := range extra {
		opts[k] = v
	}
	b, err := agent.New(purser.BackendSpec{Type: "agent", Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An agent no one here wrote, given only a base URL and a key: every
// request it makes — its own side request too — is booked from the door,
// exactly the mock's figures; the agent never sees the real key, only a
// token; the journal is recorded with the call.
func TestAgentBooksEveryRequestThroughTheDoor(t *testing.T) {
	mock := backendtest.StartMock(t)
	seen := filepath.Join(t.TempDir(), "seen.json")
	b := newAgent(t, mock, map[string]any{"env": map[string]any{"AGENT_SEEN": seen}})
	var u usage
	var journal string
	res, err := b.Call(context.Background(), purser.CallRequest{TaskID: "t1", Model: "claude-sonnet-4-5", Prompt: "write it MOCK_TOOL",
		Workspace: t.TempDir(), Hooks: purser.CallHooks{OnWire: func(j string) { journal = j }}}, u.report)
	if err != nil {
		t.Fatalf("call: %v (%s)", err, res.Text)
	}
	// The tool call (1200 + 300 written + 4000 read in, 60 out) and the
	// side call (50 in, 3 out), per the mock's README.
	want := budget.UsageEvent{InputTokens: 5500 + 50, CacheReadTokens: 4000, CacheWriteTokens: 300, OutputTokens: 63}
	if got := u.sum(); got != want || len(u.evs) != 2 {
		t.Errorf("booked %+v in %d events; want %+v in 2", got, len(u.evs), want)
	}
	if u.evs[1].Model != "claude-haiku-4-5" {
		t.Errorf("the side request was booked under %q; want its own model", u.evs[1].Model)
	}
	if journal == "" {
		t.Error("no wire journal was recorded with the call")
	}
	var s struct {
		Key  string
		Base string
		Env  []string
	}
	raw, err := os.ReadFile(seen)
	if err != nil || json.Unmarshal(raw, &s) != nil {
		t.Fatalf("the agent's record: %v", err)
	}
	if !strings.HasPrefix(s.Key, "purser-") || !strings.HasPrefix(s.Base, "http://127.0.0.1:") {
		t.Errorf("the agent got key %q and base %q; want a token and the door", s.Key, s.Base)
	}
	for _, v := range s.Env {
		if strings.Contains(v, realKey) {
			t.Fatal("the real key is in the agent's environment")
		}
	}
	if !strings.Contains(res.Note, "2 request(s), 2 reply(ies) booked") {
		t.Errorf("note %q", res.Note)
	}
}

// refuser refuses every request, as the engine does past a HARD cap.
type refuser struct{}

func (refuser) AdmitWire(context.Context, purser.WireRequest) (purser.WireGrant, error) {
	return purser.WireGrant{}, &budget.BudgetExhaustedError{Scope: budget.ScopeTask, Metric: budget.Money}
}

// A request the budget refuses reaches the agent as its provider's error,
// saying purser's budget is exhausted; nothing is spent.
func TestAgentSeesARefusalInItsProvidersWords(t *testing.T) {
	mock := backendtest.StartMock(t)
	b := newAgent(t, mock, nil)
	var u usage
	res, err := b.Call(context.Background(), purser.CallRequest{TaskID: "t1", Prompt: "hi", Workspace: t.TempDir(),
		Hooks: purser.CallHooks{Admit: refuser{}}}, u.report)
	if err == nil {
		t.Fatal("the call succeeded; the agent's only request was refused")
	}
	if !strings.Contains(res.Text, "HTTP 402") || !strings.Contains(res.Text, "purser: budget exhausted (") || !strings.Contains(res.Text, "billing_error") {
		t.Errorf("the agent saw %q; want Anthropic's 402 billing_error with purser's message", res.Text)
	}
	if len(u.evs) != 0 {
		t.Errorf("booked %+v for a refused request", u.evs)
	}
}

// admitAll admits every request as sent, as the engine does under its caps.
type admitAll struct{}

func (admitAll) AdmitWire(context.Context, purser.WireRequest) (purser.WireGrant, error) {
	return purser.WireGrant{}, nil
}

// The call's MaxOutputTokens is a lane-wide total only where nothing
// admits each request: with per-request admission, an agent's later
// requests are not refused for the output of its earlier ones.
func TestAgentOutputCapOnlyWithoutAdmission(t *testing.T) {
	mock := backendtest.StartMock(t)
	b := newAgent(t, mock, nil)
	for _, tc := range []struct {
		name   string
		admit  purser.WireAdmitter
		events int
	}{{"admitted", admitAll{}, 2}, {"unadmitted", nil, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			var u usage
			res, _ := b.Call(context.Background(), purser.CallRequest{TaskID: "t1", Model: "claude-sonnet-4-5", Prompt: "write it MOCK_TOOL",
				Workspace: t.TempDir(), MaxOutputTokens: 10, Hooks: purser.CallHooks{Admit: tc.admit}}, u.report)
			u.mu.Lock()
			n := len(u.evs)
			u.mu.Unlock()
			if n != tc.events {
				t.Errorf("booked %d replies; want %d (%s)", n, tc.events, res.Text)
			}
		})
	}
}

// The engine's cancel (the HARD cap) ends the call at once, with its cause,
// even while the agent waits on a reply.
func TestAgentStopsAtTheCap(t *testing.T) {
	mock := backendtest.StartMock(t)
	b := newAgent(t, mock, nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	capErr := &budget.BudgetExhaustedError{Scope: budget.ScopeTask, Metric: budget.Tokens}
	time.AfterFunc(500*time.Millisecond, func() { cancel(capErr) })
	start := time.Now()
	var u usage
	_, err := b.Call(ctx, purser.CallRequest{TaskID: "t1", Prompt: "MOCK_SLOW_30", Workspace: t.TempDir()}, u.report)
	if !errors.Is(err, capErr) {
		t.Errorf("err %v; want the cap's cause", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the call took %v to stop", d)
	}
}

// purser check names the door, its protocol and the key by name, never
// its value.
func TestAgentMeteringNamesTheKeyByName(t *testing.T) {
	b := newAgent(t, "http://127.0.0.1:1", nil)
	m := b.Metering()
	if !strings.Contains(m, "door") || !strings.Contains(m, "anthropic") || !strings.Contains(m, "$PURSER_TEST_ANTHROPIC_KEY") || strings.Contains(m, realKey) {
		t.Errorf("Metering() = %q", m)
	}
}

// {model} is substituted in the arguments, and promptStdin sends the
// prompt on stdin; the door's URL and the token are in the environment
// names baseURLEnv and keyEnv give.
func TestAgentCommandShape(t *testing.T) {
	t.Setenv("PURSER_TEST_OPENAI_KEY", realKey)
	ws := t.TempDir()
	b, err := agent.New(purser.BackendSpec{Type: "agent", Options: map[string]any{"wire": "openai-chat", "promptStdin": true,
		"command":    []any{"sh", "-c", `cat > prompt.txt; echo "$1" > model.txt; echo "$MY_BASE $MY_KEY" > env.txt; env > all.txt`, "sh", "{model}"},
		"upstream":   "http://127.0.0.1:9/v1",
		"key":        map[string]any{"file": writeKey(t)},
		"baseURLEnv": []any{"MY_BASE"}, "keyEnv": []any{"MY_KEY"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Call(context.Background(), purser.CallRequest{TaskID: "t", Model: "gpt-x", Prompt: "the prompt", Workspace: ws}, func(budget.UsageEvent) {}); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(ws, name))
		return strings.TrimSpace(string(b))
	}
	if read("prompt.txt") != "the prompt" || read("model.txt") != "gpt-x" {
		t.Errorf("prompt %q, model %q", read("prompt.txt"), read("model.txt"))
	}
	base, key, _ := strings.Cut(read("env.txt"), " ")
	if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasSuffix(base, "/v1") || !strings.HasPrefix(key, "purser-") {
		t.Errorf("base %q, key %q; want the door's URL with /v1 and a token", base, key)
	}
	if strings.Contains(read("all.txt"), "sk-file-key") {
		t.Error("the key file's key reached the agent")
	}
}

func writeKey(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, []byte("sk-file-key-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
