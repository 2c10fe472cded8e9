package redact_test

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser/redact"
)

func TestString(t *testing.T) {
	t.Setenv("ACME_API_KEY", "planted-secret-value-123")
	t.Setenv("HARMLESS", "planted-but-not-secret")
	tests := []struct{ in, gone, kept string }{
		{"env dump: ACME_API_KEY=planted-secret-value-123", "planted-secret-value-123", "ACME_API_KEY="},
		{"Authorization: Bearer abcdef0123456789", "abcdef0123456789", "Authorization: Bearer "},
		{`{"api_key": "zyxwvu9876543210"}`, "zyxwvu9876543210", `"api_key": "`},
		{"key sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA used", "sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA", "key "},
		{"OPENROUTER sk-or-v1-0123456789abcdef0123", "sk-or-v1-0123456789abcdef0123", "OPENROUTER"},
		{"token ghp_abcdefghijklmnopqrstuvwxyz0123", "ghp_abcdefghijklmnopqrstuvwxyz0123", "token "},
		{"x-goog-api-key: AIzaSyA-0123456789abcdefghijklmnopqrstu", "AIzaSyA-0123456789abcdefghijklmnopqrstu", "x-goog-api-key: "},
	}
	for _, tt := range tests {
		got := redact.String(tt.in)
		if strings.Contains(got, tt.gone) || !strings.Contains(got, tt.kept) || !strings.Contains(got, redact.Mask) {
			t.Errorf("String(%q) = %q", tt.in, got)
		}
	}
	if got := redact.String("HARMLESS=planted-but-not-secret, 12 tokens used"); got != "HARMLESS=planted-but-not-secret, 12 tokens used" {
		t.Errorf("ordinary text changed: %q", got)
	}
}
