package claude_test

import (
	"errors"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/backend/proc"
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
