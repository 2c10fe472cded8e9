package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/openai"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/report"
	"github.com/purser-dev/purser/sqlite"
	"github.com/purser-dev/purser/validate"
)

// fakeServer is an OpenAI-compatible Chat Completions server that counts
// prompt tokens with o200k, answers with a file block, wants wantOutput
// tokens of output but honours max_tokens, and streams usage at the end.
type fakeServer struct {
	t          *testing.T
	wantOutput int64
	cost       string // reported usage.cost (OpenRouter), or ""
	status     int    // answer with this HTTP status instead, if not 0
	mu         sync.Mutex
	maxTokens  []int64
	spent      int64
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model     string `json:"model"`
		MaxTokens *int64 `json:"max_tokens"`
		Messages  []struct {
			Content string `json:"content"`
		} `json:"messages"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test-key" {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if f.status != 0 {
		http.Error(w, `{"error":{"message":"slow down"}}`, f.status)
		return
	}
	counter, _ := contextbuild.DefaultCounter()
	prompt := int64(3)
	for _, m := range req.Messages {
		prompt += int64(counter.Count(m.Content)) + 4
	}
	out := f.wantOutput
	f.mu.Lock()
	if req.MaxTokens != nil {
		f.maxTokens = append(f.maxTokens, *req.MaxTokens)
		out = min(out, *req.MaxTokens)
	} else {
		f.maxTokens = append(f.maxTokens, -1)
	}
	f.spent += prompt + out
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	chunk(map[string]any{"id": "c1", "object": "chat.completion.chunk", "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": "Here.\n=== FILE: src/out.txt\nhello\n=== END FILE\n=== FILE: ../escape.txt\nno\n=== END FILE\n"}}}})
	usage := map[string]any{"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out}
	if f.cost != "" {
		usage["cost"] = json.RawMessage(f.cost)
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		chunk(map[string]any{"id": "c1", "object": "chat.completion.chunk", "model": req.Model, "choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func newBackend(t *testing.T, url string) *openai.Backend {
	t.Setenv("PURSER_TEST_OPENAI_KEY", "sk-test-key")
	b, err := openai.New(purser.BackendSpec{Type: "openai", Options: map[string]any{"baseUrl": url + "/v1", "apiKeyEnv": "PURSER_TEST_OPENAI_KEY"}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCallAppliesFileBlocksInsideWorkspaceOnly(t *testing.T) {
	srv := httptest.NewServer(&fakeServer{t: t, wantOutput: 50, cost: "0.0042"})
	defer srv.Close()
	b := newBackend(t, srv.URL)
	ws := t.TempDir()
	var evs []budget.UsageEvent
	res, err := b.Call(context.Background(), purser.CallRequest{Model: "gpt-5.5", Prompt: "Fix it.", MaxOutputTokens: 4096, Workspace: ws},
		func(ev budget.UsageEvent) { evs = append(evs, ev) })
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "src/out.txt")); string(data) != "hello\n" {
		t.Fatalf("file block not applied: %q", data)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "escape.txt")); err == nil {
		t.Fatal("a file block wrote outside the workspace")
	}
	if !strings.Contains(res.Feedback, `"../escape.txt"`) || !strings.Contains(res.Feedback, "outside the workspace") {
		t.Fatalf("feedback %q", res.Feedback)
	}
	// OpenRouter's usage.cost is taken as reported.
	if len(evs) != 1 || evs[0].CostSource != budget.CostReported || evs[0].USD != budget.USD(4_200_000) || evs[0].OutputTokens != 50 {
		t.Fatalf("usage %+v", evs)
	}
}

// Without usage.cost the event carries tokens only: the engine, not the
// backend, estimates its dollars.
func TestUsageWithoutCostIsLeftToTheEngineToPrice(t *testing.T) {
	srv := httptest.NewServer(&fakeServer{t: t, wantOutput: 50})
	defer srv.Close()
	var evs []budget.UsageEvent
	_, err := newBackend(t, srv.URL).Call(context.Background(), purser.CallRequest{Model: "gpt-5.5", Prompt: "Fix it.", Workspace: t.TempDir()},
		func(ev budget.UsageEvent) { evs = append(evs, ev) })
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].CostSource != budget.CostNone || evs[0].USD != 0 || evs[0].OutputTokens != 50 || evs[0].Model != "gpt-5.5" {
		t.Fatalf("usage %+v", evs)
	}
}

func TestTransientAndFatalErrors(t *testing.T) {
	for status, transient := range map[int]bool{429: true, 503: true, 400: false} {
		srv := httptest.NewServer(&fakeServer{t: t, status: status})
		_, err := newBackend(t, srv.URL).Call(context.Background(), purser.CallRequest{Model: "m", Prompt: "p", Workspace: t.TempDir()}, func(budget.UsageEvent) {})
		srv.Close()
		if err == nil || errors.Is(err, purser.ErrTransient) != transient {
			t.Errorf("HTTP %d: err %v, want transient %v", status, err, transient)
		}
	}
}

// Exact admission through the engine: max_tokens is clamped to what the
// budget has left, a call that cannot fit is never sent, and spend never
// passes the hard cap.
func TestAdmissionIsExact(t *testing.T) {
	fake := &fakeServer{t: t, wantOutput: 3000}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cb, _ := contextbuild.New()
	b := newBackend(t, srv.URL)
	e, err := engine.New(engine.Config{Store: store, Validators: validate.Runner{}, Context: cb, Artifacts: report.Artifacts{}, Prices: pricing.Builtin(),
		Backends: func(purser.BackendSpec) (purser.Backend, error) { return b, nil }, Retry: engine.RetryPolicy{Max: -1}})
	if err != nil {
		t.Fatal(err)
	}
	const hard = 20_000
	tokens, iters := int64(hard), 50
	task := purser.Task{ID: "admit", Goal: "Make it pass.", Workspace: ws, ModelTier: "standard",
		Backend:    purser.BackendSpec{Type: "openai", Models: map[string]string{"standard": "gpt-5.5"}},
		Validators: []purser.Validator{{Name: "never", Run: "exit 1"}},
		Budget:     budget.Config{Hard: budget.HardLimits{Tokens: &tokens, MaxIterations: &iters}},
		Degrade:    purser.DegradePolicy{}}
	err = e.RunTask(context.Background(), task, nil, "run")
	if !engine.IsBudgetStop(err) {
		t.Fatalf("RunTask = %v, want a budget stop", err)
	}
	totals, _ := store.UsageTotals(context.Background(), "admit")
	calls, _ := store.Calls(context.Background(), "admit")
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if totals.Tokens > hard || fake.spent > hard {
		t.Fatalf("spent %d tokens (server saw %d) under a %d-token hard cap", totals.Tokens, fake.spent, hard)
	}
	if totals.Tokens != fake.spent {
		t.Fatalf("ledger %d tokens, server %d: usage lost or counted twice", totals.Tokens, fake.spent)
	}
	clamped := false
	for _, m := range fake.maxTokens {
		if m < 0 || m > engine.DefaultReserveOutputTokens {
			t.Fatalf("a request without a budget-bound max_tokens: %v", fake.maxTokens)
		}
		clamped = clamped || m < 3000
	}
	if !clamped {
		t.Fatalf("no request had its max_tokens clamped below what the model wanted: %v", fake.maxTokens)
	}
	last := calls[len(calls)-1]
	if last.Outcome != purser.CallRefused || len(fake.maxTokens) != len(calls)-1 {
		t.Fatalf("the last call was %s; %d calls recorded, %d requests sent: the call that could not fit must not be sent", last.Outcome, len(calls), len(fake.maxTokens))
	}
	t.Logf("%d requests, max_tokens %v, %d of %d tokens spent, last call refused: %s", len(fake.maxTokens), fake.maxTokens, totals.Tokens, hard, last.Error)
}

// New checks its options and the key's variable by name; the key's value is
// never said.
func TestNewRefusesBadOptionsByName(t *testing.T) {
	t.Setenv("PURSER_TEST_OPENAI_KEY", "sk-test-secret-value")
	t.Setenv("PURSER_TEST_EMPTY_KEY", "")
	for _, tt := range []struct {
		name    string
		options map[string]any
		want    string
	}{
		{"key variable not set", map[string]any{"apiKeyEnv": "PURSER_TEST_EMPTY_KEY"}, "apiKeyEnv: the environment variable PURSER_TEST_EMPTY_KEY is not set"},
		{"not a variable name", map[string]any{"apiKeyEnv": "sk-test-secret-value"}, "apiKeyEnv: want the name of an environment variable"},
		{"typo", map[string]any{"apiKeyEnv": "PURSER_TEST_OPENAI_KEY", "baseURL": "http://x"}, "baseURL: unknown option (known: apiKeyEnv, baseUrl, maxTokensField)"},
		{"bad field", map[string]any{"apiKeyEnv": "PURSER_TEST_OPENAI_KEY", "maxTokensField": "max"}, `maxTokensField: "max": want max_tokens or max_completion_tokens`},
		{"bad URL", map[string]any{"apiKeyEnv": "PURSER_TEST_OPENAI_KEY", "baseUrl": "localhost:11434"}, `baseUrl: "localhost:11434": want an http or https URL`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := openai.New(purser.BackendSpec{Type: "openai", Options: tt.options})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to start with %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "sk-test-secret-value") || strings.Contains(err.Error(), "openai backend") {
				t.Fatalf("err = %v: a key's value, or the backend named again", err)
			}
		})
	}
}

// The key's variable is checked when the task file is loaded, before
// anything is spent, named with its file, line and option; its value never.
func TestLoadTaskChecksTheKeyVariable(t *testing.T) {
	t.Setenv("PURSER_TEST_OPENAI_KEY", "sk-test-secret-value")
	t.Setenv("PURSER_TEST_EMPTY_KEY", "")
	t.Setenv("OPENAI_API_KEY", "")
	for _, tt := range []struct{ name, backend, want string }{
		{"named variable not set", "backend:\n  type: openai\n  apiKeyEnv: PURSER_TEST_EMPTY_KEY\n", "task.yaml:8:14: backend.apiKeyEnv: the environment variable PURSER_TEST_EMPTY_KEY is not set"},
		{"default variable not set", "backend:\n  type: openai\n", "task.yaml:7:7: backend.apiKeyEnv: the environment variable OPENAI_API_KEY is not set"},
		{"a key where its variable's name goes", "backend:\n  type: openai\n  apiKeyEnv: sk-test-secret-value\n", "task.yaml:8:14: backend.apiKeyEnv: want the name of an environment variable"},
		{"set", "backend:\n  type: openai\n  apiKeyEnv: PURSER_TEST_OPENAI_KEY\n", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "task.yaml")
			if err := os.WriteFile(path, []byte("id: t\ngoal: g\nworkspace: .\nvalidators: [{name: v, run: 'true'}]\nbudget: {hard: {maxIterations: 2}}\n"+tt.backend), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := config.Loader{Backends: backend.Types{"openai": openai.NewOptions}}.LoadTask(path)
			want := strings.ReplaceAll(tt.want, "task.yaml", path)
			switch {
			case want == "" && err != nil:
				t.Fatal(err)
			case want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)):
				t.Fatalf("err = %v, want it to start with %q", err, want)
			case err != nil && strings.Contains(err.Error(), "sk-test-secret-value"):
				t.Fatalf("err = %v says a key's value", err)
			}
		})
	}
}
