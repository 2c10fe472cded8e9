package proc_test

import (
	"errors"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/proc"
)

// The one classification every backend uses: by HTTP status where there is
// one, by words where there is none.
func TestFaultClassification(t *testing.T) {
	for _, tc := range []struct {
		fault  proc.Fault
		status int
		text   string
	}{
		{proc.FaultRefused, 0, "connect ECONNREFUSED 127.0.0.1:8787"},
		{proc.FaultRefused, 0, "Reconnecting... waiting for network (Connection failed: error sending request)"},
		{proc.FaultRateLimit, 429, ""},
		{proc.FaultRateLimit, 0, `{"code":429,"status":"RESOURCE_EXHAUSTED"}`},
		{proc.FaultServer, 500, ""},
		{proc.FaultServer, 529, ""},
		{proc.FaultServer, 0, "overloaded_error"},
		{proc.FaultDropped, 0, "socket hang up (ECONNRESET)"},
		{proc.FaultTimeout, 408, ""},
		{proc.FaultTimeout, 0, "connect ETIMEDOUT"},
		{proc.FaultFatal, 400, ""},
		{proc.FaultFatal, 401, ""},
		{proc.FaultFatal, 0, "invalid_request_error: messages: field required"},
		{proc.FaultFatal, 0, "used 5000 tokens"}, // a number is not a status
	} {
		got := proc.TextFault(tc.text)
		if tc.status != 0 {
			got = proc.StatusFault(tc.status)
		}
		if got != tc.fault {
			t.Errorf("status %d, %q: %s, want %s", tc.status, tc.text, got, tc.fault)
		}
	}
}

// A transient fault matches purser.ErrTransient, a fatal one does not; the
// Retry-After a provider gave is said and kept.
func TestFaultErrorIsTransientByFault(t *testing.T) {
	for _, f := range []proc.Fault{proc.FaultRefused, proc.FaultRateLimit, proc.FaultServer, proc.FaultDropped, proc.FaultTimeout, proc.FaultRetryable} {
		if err := error(&proc.FaultError{Backend: "x", Fault: f}); !errors.Is(err, purser.ErrTransient) {
			t.Errorf("%s: not transient", f)
		}
	}
	if err := error(&proc.FaultError{Backend: "x", Fault: proc.FaultFatal}); errors.Is(err, purser.ErrTransient) {
		t.Errorf("fatal is transient")
	}
	fe := &proc.FaultError{Backend: "openai", Fault: proc.FaultRateLimit, Detail: "HTTP 429", RetryAfter: 7 * time.Second}
	if fe.Error() != "openai: rate limited: HTTP 429 (retry after 7s)" || fe.RetryAfterHint() != 7*time.Second {
		t.Errorf("%q, hint %s", fe.Error(), fe.RetryAfterHint())
	}
}
