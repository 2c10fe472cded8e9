package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// stallingBackend stalls its first call after two retries of its own, and
// fixes the task on the second; it keeps the stall window each call got.
type stallingBackend struct {
	mu      sync.Mutex
	windows []time.Duration
}

func (b *stallingBackend) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	b.mu.Lock()
	b.windows = append(b.windows, req.StallTimeout)
	n := len(b.windows)
	b.mu.Unlock()
	report(budget.UsageEvent{InputTokens: 10, Model: req.Model})
	if n == 1 {
		req.Hooks.InnerRetry()
		req.Hooks.InnerRetry()
		return purser.CallResult{}, &purser.StallError{Window: req.StallTimeout, Source: "the agent"}
	}
	return purser.CallResult{Text: "fixed"}, os.WriteFile(filepath.Join(req.Workspace, "src", "fixed"), []byte("yes"), 0o644)
}

// A stalled call is recorded as stalled, with its own error text and the
// retries the agent made by itself, and retried by Purser's policy; the
// backend is given the stall window its spec sets, or the engine's default.
func TestStalledCallIsRecordedAndRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		spec, want time.Duration
	}{
		{"the backend's window", 3 * time.Second, 3 * time.Second},
		{"the default window", 0, purser.DefaultStallTimeout},
		{"no stall detection", -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "steps: []\n")
			b := &stallingBackend{}
			f.cfg.Backends = func(purser.BackendSpec) (purser.Backend, error) { return b, nil }
			f.task.Backend.StallTimeout = tc.spec
			must(t, f.run())
			calls, err := f.store.Calls(context.Background(), f.task.ID)
			must(t, err)
			var main []purser.CallRecord
			for _, c := range calls {
				if c.Kind == purser.CallMain {
					main = append(main, c)
				}
			}
			if len(main) != 2 {
				t.Fatalf("main calls %+v: want the stalled one and its retry", main)
			}
			if c := main[0]; c.Outcome != purser.CallStalled || !strings.Contains(c.Error, "stalled: no bytes from the agent") || c.InnerRetries != 2 {
				t.Fatalf("first call %+v: want stalled, its error saying so, 2 inner retries", c)
			}
			if c := main[1]; c.Outcome != purser.CallOK || c.Attempt != 2 || c.InnerRetries != 0 {
				t.Fatalf("retry %+v: want attempt 2, ok, no inner retries", c)
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			for _, w := range b.windows {
				if w != tc.want {
					t.Fatalf("stall windows %v: want %s for each call", b.windows, tc.want)
				}
			}
		})
	}
}

// A stall is transient: it matches both sentinels the engine branches on.
func TestStallIsTransient(t *testing.T) {
	err := error(&purser.StallError{Window: time.Second, Source: "x"})
	if !errors.Is(err, purser.ErrStalled) || !errors.Is(err, purser.ErrTransient) {
		t.Fatalf("%v: want a transient stall", err)
	}
}

// rateLimited answers its first call with a 429 that asks for a wait.
type rateLimited struct {
	mu    sync.Mutex
	calls []time.Time
	wait  time.Duration
}

type retryAfterError struct{ wait time.Duration }

func (e retryAfterError) Error() string                 { return "429: come back later" }
func (e retryAfterError) Is(target error) bool          { return target == purser.ErrTransient }
func (e retryAfterError) RetryAfterHint() time.Duration { return e.wait }

func (b *rateLimited) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	b.mu.Lock()
	b.calls = append(b.calls, time.Now())
	n := len(b.calls)
	b.mu.Unlock()
	report(budget.UsageEvent{InputTokens: 10, Model: req.Model})
	if n == 1 {
		return purser.CallResult{}, retryAfterError{b.wait}
	}
	return purser.CallResult{}, os.WriteFile(filepath.Join(req.Workspace, "src", "fixed"), []byte("yes"), 0o644)
}

// Purser's retry waits at least as long as a 429's Retry-After asked, even
// when its own backoff is shorter.
func TestRetryHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "steps: []\n")
	b := &rateLimited{wait: 300 * time.Millisecond}
	f.cfg.Backends = func(purser.BackendSpec) (purser.Backend, error) { return b, nil }
	must(t, f.run())
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.calls) != 2 {
		t.Fatalf("%d calls, want the rate-limited one and its retry", len(b.calls))
	}
	if gap := b.calls[1].Sub(b.calls[0]); gap < b.wait {
		t.Fatalf("retried after %s, before the %s the provider asked for (backoff 1ms)", gap, b.wait)
	}
}
