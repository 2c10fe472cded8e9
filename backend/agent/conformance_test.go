package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/agent"
	"github.com/purser-dev/purser/backend/backendtest"
)

const relayEnv = "AGENT_TEST_RELAY"

func TestMain(m *testing.M) {
	if os.Getenv(relayEnv) == "1" {
		os.Exit(relay())
	}
	os.Exit(m.Run())
}

// relay is the agent of the conformance suite: the test binary, given the
// door's URL and a token as any agent CLI is, makes one streamed request
// and prints the reply. The suite scripts the provider behind the door.
func relay() int {
	body, _ := json.Marshal(map[string]any{"model": os.Getenv("PURSER_MODEL"), "max_tokens": 100000, "stream": true,
		"messages": []any{map[string]any{"role": "user", "content": "go"}}})
	req, err := http.NewRequest("POST", os.Getenv("ANTHROPIC_BASE_URL")+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	req.Header.Set("x-api-key", os.Getenv("ANTHROPIC_API_KEY"))
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connection error:", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		fmt.Fprintf(os.Stderr, "HTTP %d: %s\n", resp.StatusCode, b)
		return 1
	}
	var got bytes.Buffer
	_, err = io.Copy(io.MultiWriter(os.Stdout, &tailWriter{&got}), resp.Body)
	if err != nil || !strings.Contains(got.String(), "message_stop") {
		fmt.Fprintln(os.Stderr, "the stream ended early:", err)
		return 1
	}
	if strings.Contains(got.String(), "event: error") {
		fmt.Fprintln(os.Stderr, "the provider sent an error")
		return 1
	}
	return 0
}

// tailWriter keeps the last 64 KiB written.
type tailWriter struct{ b *bytes.Buffer }

func (t *tailWriter) Write(p []byte) (int, error) {
	t.b.Write(p)
	if t.b.Len() > 64<<10 {
		rest := append([]byte(nil), t.b.Bytes()[t.b.Len()-(64<<10):]...)
		t.b.Reset()
		t.b.Write(rest)
	}
	return len(p), nil
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T, s backendtest.Script) purser.Backend {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req struct {
					MaxTokens int64 `json:"max_tokens"`
					Model     string
				}
				if r.URL.Path != "/v1/messages" || r.Header.Get("x-api-key") != realKey || json.NewDecoder(r.Body).Decode(&req) != nil {
					http.Error(w, "want POST /v1/messages with the real key", http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				backendtest.ServeHTTP(w, r, s, &messagesProvider{w: w, maxTokens: req.MaxTokens})
			}))
			t.Cleanup(srv.Close)
			t.Setenv("PURSER_TEST_ANTHROPIC_KEY", realKey)
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			return backendtest.Build(t, agent.New, purser.BackendSpec{Type: "agent", Dir: s.State, Options: map[string]any{
				"wire": "anthropic", "command": []any{exe}, "model": "claude-sonnet-4-5", "upstream": srv.URL,
				"key": map[string]any{"env": "PURSER_TEST_ANTHROPIC_KEY"}, "env": map[string]any{relayEnv: "1"}}})
		},
		Unsupported: map[backendtest.Capability]string{
			backendtest.USDFence:   "a Messages request takes no spending cap: the door clamps max_tokens, and the engine's hard cap cuts the stream",
			backendtest.ReportsUSD: "Anthropic's replies carry tokens, not dollars: the engine prices them",
			backendtest.ProcessGroup: "the scripted side is the provider behind the door; the agent is a relay run by proc.Run, " +
				"whose process group handling the exec backend's suite covers",
			backendtest.RejectsBadOutput: "an agent's stdout is free text: garbage or silence from the provider is said in the note (replies booked: 0)",
		},
	})
}

// messagesProvider streams Anthropic Messages: one message per reply
// (message_start with its input, message_delta with its output), so that
// each reply's usage is whole at its message_delta; it honours max_tokens.
type messagesProvider struct {
	w         http.ResponseWriter
	maxTokens int64
	started   bool
}

func (p *messagesProvider) event(a *backendtest.Agent, name string, v any, told backendtest.Usage) {
	p.started = true
	told.USD = 0 // Anthropic's stream tells tokens only
	a.Print(append(append([]byte("event: "+name+"\ndata: "), backendtest.JSON(v)...), '\n', '\n'), told)
}

func (p *messagesProvider) Begin(a *backendtest.Agent) { a.OutputCap = p.maxTokens }

func (p *messagesProvider) Reply(a *backendtest.Agent, i int, prev, u backendtest.Usage) {
	p.event(a, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"model": "claude-sonnet-4-5",
		"usage": map[string]any{"input_tokens": u.Input - u.CacheRead - u.CacheWrite, "cache_read_input_tokens": u.CacheRead,
			"cache_creation_input_tokens": u.CacheWrite, "output_tokens": 1}}}, prev)
	p.event(a, "content_block_delta", map[string]any{"type": "content_block_delta", "delta": map[string]any{"type": "text_delta", "text": a.Text(i)}}, prev)
	p.event(a, "message_delta", map[string]any{"type": "message_delta", "usage": map[string]any{"output_tokens": u.Output}}, prev.Plus(u))
}

func (p *messagesProvider) End(a *backendtest.Agent, total backendtest.Usage) {
	p.event(a, "message_stop", map[string]any{"type": "message_stop"}, backendtest.Usage{})
}

func (p *messagesProvider) Fail(a *backendtest.Agent, msg string, total backendtest.Usage) {
	failure := map[string]any{"type": "error", "error": map[string]any{"type": "authentication_error", "message": msg}}
	if p.started {
		p.event(a, "error", failure, backendtest.Usage{})
		return
	}
	p.w.Header().Set("Content-Type", "application/json")
	p.w.WriteHeader(http.StatusUnauthorized)
	_, _ = p.w.Write(backendtest.JSON(failure))
}

func (p *messagesProvider) Crash(a *backendtest.Agent, msg string) {
	p.w.Header().Set("Content-Type", "application/json")
	p.w.WriteHeader(http.StatusInternalServerError)
	_, _ = p.w.Write(backendtest.JSON(map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": msg}}))
}
