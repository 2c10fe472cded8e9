package gateway_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser/gateway"
)

// A Claude OAuth token (ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN, a
// browser login) goes upstream as Authorization: Bearer, not x-api-key: the
// agent presents its token there, the provider gets the real one there.
func TestDoorPutsABearerKeyInAuthorization(t *testing.T) {
	up, got := provider(t, `{"model":"m","usage":{"input_tokens":1,"output_tokens":1}}`)
	t.Setenv("PURSER_TEST_OAUTH", "sk-ant-oat-real")
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL,
		Key: gateway.Key{Env: "PURSER_TEST_OAUTH", Bearer: true}})
	status, body := do(t, "POST", l.URL()+"/v1/messages", map[string]string{"Authorization": "Bearer " + l.Token(),
		"anthropic-beta": "oauth-2025-04-20"}, `{"model":"m","max_tokens":5}`)
	if status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	r := got.last(t)
	if a := r.header.Get("Authorization"); a != "Bearer sk-ant-oat-real" {
		t.Errorf("provider's Authorization = %q, want the real token as Bearer", a)
	}
	if r.header.Get("X-Api-Key") != "" {
		t.Errorf("provider got an x-api-key beside the Bearer token")
	}
	if r.header.Get("Anthropic-Beta") != "oauth-2025-04-20" {
		t.Errorf("the agent's anthropic-beta header was not passed")
	}
}

// A login file is read at a JSON path, outside the agent; its name (never
// its value) says where; a missing field is an error naming the path.
func TestDoorReadsAKeyFromALoginFile(t *testing.T) {
	up, got := provider(t, `{"model":"m","usage":{"input_tokens":1,"output_tokens":1}}`)
	file := filepath.Join(t.TempDir(), ".credentials.json")
	if err := os.WriteFile(file, []byte(`{"claudeAiOauth":{"accessToken":"sk-ant-oat-from-file","refreshToken":"r"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	k := gateway.Key{File: file, Field: "claudeAiOauth.accessToken", Bearer: true}
	if n := k.Name(); n != "file "+file+" (claudeAiOauth.accessToken)" || strings.Contains(n, "sk-ant") {
		t.Errorf("Name() = %q", n)
	}
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL, Key: k})
	if status, body := do(t, "POST", l.URL()+"/v1/messages", map[string]string{"Authorization": "Bearer " + l.Token()}, `{"model":"m"}`); status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	if a := got.last(t).header.Get("Authorization"); a != "Bearer sk-ant-oat-from-file" {
		t.Errorf("provider's Authorization = %q", a)
	}
	_, err := gateway.Open(context.Background(), gateway.LaneConfig{Protocol: gateway.Anthropic, Upstream: up.URL,
		Key: gateway.Key{File: file, Field: "claudeAiOauth.nope"}})
	if err == nil || !strings.Contains(err.Error(), "claudeAiOauth.nope") || strings.Contains(err.Error(), "sk-ant") {
		t.Errorf("a missing field: err %v, want it named (and no value)", err)
	}
}

// Getenv is where Env is read: a CLI backend's options' env over Purser's.
func TestDoorReadsTheKeyFromTheLanesEnvironment(t *testing.T) {
	up, got := provider(t, `{"candidates":[],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1}}`)
	env := map[string]string{"GEMINI_API_KEY": "gem-real"}
	l := open(t, context.Background(), gateway.LaneConfig{Protocol: gateway.Gemini, Upstream: up.URL,
		Key: gateway.Key{Env: "GEMINI_API_KEY"}, Getenv: func(k string) string { return env[k] }})
	if status, body := do(t, "POST", l.URL()+"/v1beta/models/g:generateContent?key="+l.Token(), nil, `{}`); status != 200 {
		t.Fatalf("status %d %s", status, body)
	}
	if k := got.last(t).header.Get("X-Goog-Api-Key"); k != "gem-real" {
		t.Errorf("provider's x-goog-api-key = %q", k)
	}
	if status, _ := do(t, "POST", l.URL()+"/v1beta/models/g:generateContent?key=gem-real", nil, `{}`); status != 401 {
		t.Errorf("the real key presented: status %d, want 401", status)
	}
}
