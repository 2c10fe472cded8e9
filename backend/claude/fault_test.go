package claude_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
)

// Claude Code's failed results, as the fixtures and the real CLI against the
// mock show them, classified as on every backend.
func TestClaudeFaults(t *testing.T) {
	status := func(n int) *int { return &n }
	for _, tc := range []struct {
		fault  proc.Fault
		status *int
		text   string
	}{
		{proc.FaultRefused, nil, "API Error: Unable to connect to API (ConnectionRefused)"},
		{proc.FaultRateLimit, status(429), "API Error: 429 mock injected 429"},
		{proc.FaultServer, status(500), "API Error: 500 mock injected 500. This is a server-side issue, usually temporary — try again in a moment."},
		{proc.FaultServer, status(529), "API Error: 529 mock injected 529. This is a server-side issue, usually temporary — try again in a moment."},
		{proc.FaultDropped, nil, "API Error: Connection to the API was lost (ECONNRESET). This is usually temporary — try again."},
		{proc.FaultFatal, status(400), "API Error: 400 mock injected 400"},
		{proc.FaultFatal, status(401), "Failed to authenticate. API Error: 401 mock injected 401"},
	} {
		t.Run(string(tc.fault)+" "+tc.text, func(t *testing.T) {
			err := claude.Classify(tc.status, tc.text)
			var fe *proc.FaultError
			if !errors.As(err, &fe) || fe.Fault != tc.fault {
				t.Fatalf("%v: want %s", err, tc.fault)
			}
			if errors.Is(err, purser.ErrTransient) != tc.fault.Transient() {
				t.Fatalf("%v: transient %v, want %v", err, errors.Is(err, purser.ErrTransient), tc.fault.Transient())
			}
		})
	}
}

// Claude Code runs with its own retries off, and an api_retry line it
// prints all the same is counted as an inner retry of the call.
func TestClaudeInnerRetriesCounted(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "claude")
	body := `#!/bin/sh
cat >/dev/null
[ "$CLAUDE_CODE_MAX_RETRIES" = 0 ] || { echo "CLAUDE_CODE_MAX_RETRIES=$CLAUDE_CODE_MAX_RETRIES" >&2; exit 9; }
echo '{"type":"system","subtype":"init","session_id":"s1"}'
echo '{"type":"system","subtype":"api_retry","attempt":1,"max_retries":0,"retry_delay_ms":1,"error_status":529,"error":"overloaded","session_id":"s1"}'
echo '{"type":"system","subtype":"api_retry","attempt":2,"max_retries":0,"retry_delay_ms":1,"error_status":529,"error":"overloaded","session_id":"s1"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s1","total_cost_usd":0,"modelUsage":{}}'
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := claude.New(purser.BackendSpec{Type: "claude", Options: map[string]any{"command": script, "env": map[string]any{"CLAUDE_CODE_MAX_RETRIES": "5"}}})
	if err != nil {
		t.Fatal(err)
	}
	var retries atomic.Int64
	hooks := purser.CallHooks{OnInnerRetry: func() { retries.Add(1) }}
	if _, err := b.Call(t.Context(), purser.CallRequest{Workspace: dir, Prompt: "p", Hooks: hooks}, func(budget.UsageEvent) {}); err != nil {
		t.Fatal(err)
	}
	if retries.Load() != 2 {
		t.Fatalf("%d inner retries counted, want the 2 api_retry lines", retries.Load())
	}
}
