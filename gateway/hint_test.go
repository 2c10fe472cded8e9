package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/gateway"
)

// budgetHint: the note of what remains reaches the model at the end of
// the conversation, and the bytes of the request up to its last cache
// breakpoint — what the provider's prompt cache keys on — are unchanged.
func TestBudgetHintKeepsTheCachedPrefix(t *testing.T) {
	const hint = "[purser] budget left: $0.40 of $1.00, 12k tokens, 3 iterations"
	for _, tc := range []struct {
		name, protocol, path, body string
		breakpoint                 string // the last cache breakpoint's text, where the protocol marks one
	}{
		{"anthropic blocks", gateway.Anthropic, "/v1/messages",
			`{"model":"m","max_tokens":9,"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],` +
				`"messages":[{"role":"user","content":"one"},{"role":"assistant","content":"two"},` +
				`{"role":"user","content":[{"type":"text","text":"three","cache_control":{"type":"ephemeral"}}]}]}`,
			`"cache_control":{"type":"ephemeral"}}`},
		{"anthropic string", gateway.Anthropic, "/v1/messages",
			`{"model":"m","max_tokens":9,"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"one"}]}`,
			`"cache_control":{"type":"ephemeral"}}`},
		{"chat", gateway.OpenAIChat, "/v1/chat/completions", `{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":"one"}]}`, ""},
		{"responses", gateway.OpenAIResponses, "/v1/responses", `{"model":"m","input":[{"role":"user","content":"one"}]}`, ""},
		{"gemini", gateway.Gemini, "/v1beta/models/g:generateContent", `{"contents":[{"role":"user","parts":[{"text":"one"}]}]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, s := provider(t, `{}`)
			l := open(t, context.Background(), gateway.LaneConfig{Protocol: tc.protocol, Upstream: up.URL,
				Admit: &admitter{grant: purser.WireGrant{Hint: hint}}})
			if status, body := do(t, "POST", l.URL()+tc.path, map[string]string{"x-api-key": l.Token()}, tc.body); status != 200 {
				t.Fatalf("status %d %s", status, body)
			}
			got := s.last(t).body
			if !json.Valid([]byte(got)) || !strings.Contains(got, "budget left: $0.40") {
				t.Fatalf("the provider got %s; want valid JSON with the hint", got)
			}
			// Everything the agent sent is there, in order, up to the end of
			// its last message's text: only the tail after it is new.
			end := strings.LastIndex(tc.body, `one"`) + len(`one`)
			if tc.name == "anthropic blocks" {
				end = strings.LastIndex(tc.body, `three"`) + len(`three"`)
			}
			if !strings.HasPrefix(got, tc.body[:end]) {
				t.Errorf("the prefix changed:\n got %s\nsent %s", got, tc.body)
			}
			if tc.breakpoint != "" {
				cut := strings.LastIndex(tc.body, tc.breakpoint) + len(tc.breakpoint)
				if !bytes.HasPrefix([]byte(got), []byte(tc.body[:cut])) {
					t.Errorf("the bytes up to the last cache breakpoint changed:\n got %s\nsent %s", got, tc.body)
				}
				if i := strings.Index(got, "budget left"); i < cut {
					t.Errorf("the hint is at %d, before the last breakpoint's end %d", i, cut)
				}
			}
		})
	}
}
