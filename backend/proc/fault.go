package proc

import (
	"fmt"
	"regexp"
	"time"

	"github.com/purser-dev/purser"
)

// Fault is the kind of failure a call ended with, told the same way on every
// backend, whatever words its CLI or client uses for it.
type Fault string

// The faults. Every one but FaultFatal is transient: Purser's one retry
// policy retries it, through the budget.
const (
	FaultRefused   Fault = "connection refused" // nothing listens, or the network is down
	FaultRateLimit Fault = "rate limited"       // HTTP 429, with or without Retry-After
	FaultServer    Fault = "server error"       // HTTP 5xx, 529 overloaded
	FaultDropped   Fault = "connection dropped" // the connection or stream broke mid-way
	FaultTimeout   Fault = "timed out"          // HTTP 408, a request timeout
	FaultStalled   Fault = "stalled"            // nothing came for the stall window
	FaultRetryable Fault = "asked for a retry"  // the agent said so (exec's exit 75), not why
	FaultFatal     Fault = "fatal"              // a refused key, a bad request: retrying cannot help
)

// Transient reports whether Purser's retry policy retries the fault.
func (f Fault) Transient() bool { return f != FaultFatal && f != "" }

// StatusFault classifies an HTTP status; 0 (no status) is "".
func StatusFault(code int) Fault {
	switch {
	case code == 0:
		return ""
	case code == 408:
		return FaultTimeout
	case code == 429:
		return FaultRateLimit
	case code >= 500:
		return FaultServer
	}
	return FaultFatal
}

// The words the CLIs and clients use, per fault, in the order tried: a
// refused connection first (Codex says "waiting for network" and a status
// may follow), a stall before a timeout.
var textFaults = []struct {
	fault Fault
	re    *regexp.Regexp
}{
	{FaultRefused, regexp.MustCompile(`(?i)ECONNREFUSED|ConnectionRefused|connection refused|Unable to connect|fetch failed|Connection failed|waiting for network|ENOTFOUND|EAI_AGAIN|no such host`)},
	{FaultRateLimit, regexp.MustCompile(`(?i)\b429\b|Too Many Requests|rate.?limit|RESOURCE_EXHAUSTED|quota`)},
	{FaultServer, regexp.MustCompile(`(?i)\b(500|502|503|504|529)\b|overloaded|Internal Server Error|Bad Gateway|Service Unavailable|"status":\s*"(INTERNAL|UNAVAILABLE)"|high demand`)},
	{FaultDropped, regexp.MustCompile(`(?i)ECONNRESET|EPIPE|connection reset|stream disconnected|Connection to the API was lost|socket hang up|terminated|unexpected EOF|premature close`)},
	{FaultTimeout, regexp.MustCompile(`(?i)ETIMEDOUT|\b408\b|timed? ?out|deadline exceeded`)},
}

// TextFault classifies a CLI's or client's error message; a message naming
// no transient fault is fatal.
func TextFault(msg string) Fault {
	for _, tf := range textFaults {
		if tf.re.MatchString(msg) {
			return tf.fault
		}
	}
	return FaultFatal
}

// FaultError is a call's failure, classified. It matches purser.ErrTransient
// when its fault is transient.
type FaultError struct {
	Backend string // claude, codex, …
	Fault   Fault
	Detail  string // the CLI's or server's words, secrets masked
	// RetryAfter is the wait the provider asked for (429 Retry-After), 0
	// when it asked for none.
	RetryAfter time.Duration
}

func (e *FaultError) Error() string {
	msg := fmt.Sprintf("%s: %s", e.Backend, e.Fault)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return msg
}

// Is makes a transient fault match purser.ErrTransient.
func (e *FaultError) Is(target error) bool {
	return target == purser.ErrTransient && e.Fault.Transient()
}

// RetryAfterHint is the wait the provider asked for, which Purser's retry
// policy honours.
func (e *FaultError) RetryAfterHint() time.Duration { return e.RetryAfter }
