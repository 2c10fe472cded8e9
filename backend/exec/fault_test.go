package exec_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	pexec "github.com/purser-dev/purser/backend/exec"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
)

// How an exec command ends, classified as on every backend: the fault its
// stderr names when it asks for a retry, a silent command ended as stalled,
// any other failure fatal.
func TestExecFaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		fault  proc.Fault
	}{
		{"refused connection", "echo 'connect ECONNREFUSED 127.0.0.1:1' >&2; exit 75", proc.FaultRefused},
		{"429", "echo 'HTTP 429 Too Many Requests' >&2; exit 75", proc.FaultRateLimit},
		{"5xx", "echo 'HTTP 503 Service Unavailable' >&2; exit 75", proc.FaultServer},
		{"asked for a retry", "echo 'try later' >&2; exit 75", proc.FaultRetryable},
		{"stalled", "echo started; exec sleep 300", proc.FaultStalled},
		{"fatal", "echo 'bad key' >&2; exit 1", proc.FaultFatal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := pexec.New(purser.BackendSpec{Type: "exec", Options: map[string]any{"command": []any{"sh", "-c", tc.script}}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = b.Call(context.Background(), purser.CallRequest{Workspace: t.TempDir(), Prompt: "p", StallTimeout: time.Second},
				func(budget.UsageEvent) {})
			var fe *proc.FaultError
			switch {
			case tc.fault == proc.FaultStalled:
				if !errors.Is(err, purser.ErrStalled) {
					t.Fatalf("%v: want the command ended as stalled", err)
				}
			case tc.fault == proc.FaultFatal:
				if err == nil || errors.Is(err, purser.ErrTransient) {
					t.Fatalf("%v: want a fatal error", err)
				}
			case !errors.As(err, &fe) || fe.Fault != tc.fault || !errors.Is(err, purser.ErrTransient):
				t.Fatalf("%v: want %s, transient", err, tc.fault)
			}
		})
	}
}
