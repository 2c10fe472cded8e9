package openai_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/backend/openai"
)

const conformanceKey = "sk-conformance-test-key-0123456789"

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T, s backendtest.Script) purser.Backend {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req chatRequest
				if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer "+conformanceKey {
					http.Error(w, "want POST /v1/chat/completions with the key", http.StatusBadRequest)
					return
				}
				if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Stream || req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
					http.Error(w, "want a streaming request with stream_options.include_usage", http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				backendtest.ServeHTTP(w, r, s, &chatProvider{w: w, req: req})
			}))
			t.Cleanup(srv.Close)
			t.Setenv("PURSER_CONFORMANCE_OPENAI_KEY", conformanceKey)
			return backendtest.Build(t, openai.New, purser.BackendSpec{Type: "openai", Options: map[string]any{"baseUrl": srv.URL + "/v1", "apiKeyEnv": "PURSER_CONFORMANCE_OPENAI_KEY"}})
		},
		Unsupported: map[backendtest.Capability]string{
			backendtest.USDFence:     "a Chat Completions request takes no spending cap: max_tokens bounds it, and the engine's hard cap",
			backendtest.ProcessGroup: "the openai backend is an HTTP client in Purser's process: there is no process to stop",
		},
	})
}

type chatRequest struct {
	Model               string `json:"model"`
	Stream              bool   `json:"stream"`
	MaxTokens           *int64 `json:"max_tokens"`
	MaxCompletionTokens *int64 `json:"max_completion_tokens"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// chatProvider streams a Chat Completion as OpenAI-compatible servers do:
// content chunks carrying the usage so far (as vLLM's continuous usage
// stats and some gateways do), a chunk with finish_reason, a last chunk
// with the totals (and OpenRouter's usage.cost), then [DONE]. It honours
// max_tokens, and fails with an HTTP error before it streams, or an error
// event after.
type chatProvider struct {
	w       http.ResponseWriter
	req     chatRequest
	started bool
}

func (p *chatProvider) event(a *backendtest.Agent, v any, told backendtest.Usage) {
	p.started = true
	a.Print(append(append([]byte("data: "), backendtest.JSON(v)...), '\n'), told)
}

func chatUsage(u backendtest.Usage) map[string]any {
	m := map[string]any{"prompt_tokens": u.Input, "completion_tokens": u.Output, "total_tokens": u.Tokens(),
		"prompt_tokens_details": map[string]any{"cached_tokens": u.CacheRead}}
	if u.USD > 0 {
		m["cost"] = u.USD
	}
	return m
}

// told is what the server tells: tokens, no cache writes, and dollars only
// where it said them.
func told(u backendtest.Usage) backendtest.Usage {
	u.CacheWrite = 0
	return u
}

func (p *chatProvider) chunk(choices []any, usage any) map[string]any {
	return map[string]any{"id": "chatcmpl-conformance", "object": "chat.completion.chunk", "model": p.req.Model, "choices": choices, "usage": usage}
}

func (p *chatProvider) Begin(a *backendtest.Agent) {
	for _, m := range []*int64{p.req.MaxTokens, p.req.MaxCompletionTokens} {
		if m != nil {
			a.OutputCap = *m
		}
	}
}

func (p *chatProvider) Reply(a *backendtest.Agent, i int, prev, u backendtest.Usage) {
	sofar := prev.Plus(u)
	sofar.USD = 0
	p.event(a, p.chunk([]any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": a.Text(i) + "\n"}}}, chatUsage(sofar)), told(sofar))
}

func (p *chatProvider) End(a *backendtest.Agent, total backendtest.Usage) {
	p.event(a, p.chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}, nil), backendtest.Usage{})
	p.event(a, p.chunk([]any{}, chatUsage(total)), told(total))
	a.Print([]byte("data: [DONE]\n"), backendtest.Usage{})
}

func (p *chatProvider) Fail(a *backendtest.Agent, msg string, total backendtest.Usage) {
	failure := map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": "invalid_api_key"}}
	if p.started {
		p.event(a, failure, backendtest.Usage{})
		return
	}
	p.w.Header().Set("Content-Type", "application/json")
	p.w.WriteHeader(http.StatusUnauthorized)
	_, _ = p.w.Write(backendtest.JSON(failure))
}

func (p *chatProvider) Crash(a *backendtest.Agent, msg string) {
	p.w.Header().Set("Content-Type", "application/json")
	p.w.WriteHeader(http.StatusInternalServerError)
	_, _ = p.w.Write(backendtest.JSON(map[string]any{"error": map[string]any{"message": msg, "type": "server_error"}}))
}
