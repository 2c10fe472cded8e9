package purser

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// One retry policy, Purser's: a backend switches its CLI's own retries off
// where the CLI allows it, tells the engine of every retry it could not
// switch off (InnerRetry), and classifies each fault the same way (refused
// connection, 429, 5xx, a stall: transient, wrapped in ErrTransient; a
// refused key or a bad request: fatal).

// DefaultStallTimeout is how long a call may go without a byte from the agent
// (its output, its session file) or the provider before it is ended as
// stalled, when its backend sets no stallTimeout.
const DefaultStallTimeout = 2 * time.Minute

// ErrStalled marks a call ended because nothing came from the agent or the
// provider for the stall window. A stall is transient: errors.Is(err,
// ErrTransient) holds for it too.
var ErrStalled = errors.New("stalled")

// StallError is a call ended by the stall detector.
type StallError struct {
	Window time.Duration // how long nothing came
	Source string        // what was silent: "the agent", "the provider's stream"
}

func (e *StallError) Error() string {
	return fmt.Sprintf("stalled: no bytes from %s for %s", e.Source, e.Window)
}

// Is makes a stall match both ErrStalled and ErrTransient.
func (e *StallError) Is(target error) bool { return target == ErrStalled || target == ErrTransient }

type innerRetryKey struct{}

// WithInnerRetry returns ctx carrying fn, which a backend calls through
// InnerRetry for each retry its CLI or client made on its own.
func WithInnerRetry(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, innerRetryKey{}, fn)
}

// InnerRetry tells whoever made the call (WithInnerRetry) that the agent
// retried a request by itself; without a listener it does nothing. It may be
// called from any goroutine.
func InnerRetry(ctx context.Context) {
	if fn, ok := ctx.Value(innerRetryKey{}).(func()); ok {
		fn()
	}
}
