package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/purser-dev/purser/gateway"
)

// Issue 22 item 10, at the door: a stream the provider drops after saying
// what it bills of it (Anthropic's message_start: input and cache, one
// output token; Gemini's first chunk: the prompt) is booked for that, once,
// whether the connection breaks or closes; one dropped before it said
// anything (OpenAI Responses after response.created) books nothing. With
// the door the CLIs' source of truth, nothing else would book it: the CLI
// that retries the request reports only what it saw, on a stdout no longer
// booked.
func TestDoorBooksWhatADroppedStreamSaid(t *testing.T) {
	for _, tc := range []struct {
		name, protocol, path, body, first string
		close                             bool // close the stream cleanly (else break the connection)
		want                              int64
	}{
		{"anthropic, broken", gateway.Anthropic, "/v1/messages", `{"model":"m","max_tokens":10,"stream":true,"messages":[]}`,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":1200,\"cache_creation_input_tokens\":300,\"cache_read_input_tokens\":4000,\"output_tokens\":1}}}\n\n",
			false, 5501},
		{"anthropic, closed", gateway.Anthropic, "/v1/messages", `{"model":"m","max_tokens":10,"stream":true,"messages":[]}`,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":1200,\"cache_creation_input_tokens\":300,\"cache_read_input_tokens\":4000,\"output_tokens\":1}}}\n\n",
			true, 5501},
		{"gemini, broken", gateway.Gemini, "/v1beta/models/g:streamGenerateContent", `{"contents":[]}`,
			"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"d\"}]}}],\"usageMetadata\":{\"promptTokenCount\":5200,\"totalTokenCount\":5200}}\n\n",
			false, 5200},
		{"responses, broken before any usage", gateway.OpenAIResponses, "/v1/responses", `{"model":"m","stream":true,"input":"x"}`,
			"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"usage\":null}}\n\n",
			false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte(tc.first))
				w.(http.Flusher).Flush()
				if tc.close {
					return // a clean end, with no message_delta
				}
				panic(http.ErrAbortHandler) // the connection broken mid-stream
			}))
			defer up.Close()
			var mu sync.Mutex
			var booked int64
			replies := 0
			l := open(t, context.Background(), gateway.LaneConfig{Protocol: tc.protocol, Upstream: up.URL, Report: func(ev budgetEvent) {
				mu.Lock()
				booked += ev.Tokens()
				replies++
				mu.Unlock()
			}})
			do(t, "POST", l.URL()+tc.path, map[string]string{"x-api-key": l.Token(), "x-goog-api-key": l.Token(), "Authorization": "Bearer " + l.Token()}, tc.body)
			_ = l.Close()
			mu.Lock()
			defer mu.Unlock()
			if booked != tc.want || (tc.want > 0) != (replies == 1) {
				t.Fatalf("booked %d tokens in %d reports; want %d, once", booked, replies, tc.want)
			}
		})
	}
}
