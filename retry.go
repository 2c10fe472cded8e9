package purser

import (
	"errors"
	"fmt"
	"time"
)

// One retry policy, Purser's: a backend switches its CLI's own retries off
// where the CLI allows it, tells the engine of every retry it could not
// switch off (CallHooks.InnerRetry), and classifies each fault the same way
// (refused connection, 429, 5xx, a stall: transient, wrapped in
// ErrTransient; a refused key or a bad request: fatal).

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
