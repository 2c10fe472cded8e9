package sandbox

import (
	"fmt"

	"github.com/purser-dev/purser/internal/reswire"
)

// The client's side of a resident box's wire (Box.Serve; the wire is
// documented in internal/boxinit/serve.go): a caller writes these on its end
// of the socket pair, one datagram each.
const (
	// ResidentReady is what the box's init sends once it is set up.
	ResidentReady = reswire.MsgReady
	// ResidentStarted is what the box's init sends once a command has
	// started: a box that ends before saying so never ran it.
	ResidentStarted = reswire.MsgStarted
	// ResidentStale is what the box's init sends instead, not starting the
	// command, when the command's directory was removed since the box was
	// made: the box ends, and the command may run in a new one.
	ResidentStale = reswire.MsgStale
	// ResidentTerm asks the box to send SIGTERM to the running command's
	// process group.
	ResidentTerm = reswire.MsgTerm
	// ResidentKill asks the box to SIGKILL every process in it but its
	// init.
	ResidentKill = reswire.MsgKill
)

// ResidentRequest is the datagram asking a resident box to run argv in dir
// with env; it goes with three descriptors in an SCM_RIGHTS message: the
// command's stdin, stdout and stderr (reswire.Request).
func ResidentRequest(dir string, argv, env []string) ([]byte, error) {
	p, err := reswire.Request(dir, argv, env)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return p, nil
}

// ParseResidentReply reads a resident box's reply to a run: the command's
// status as a shell gives it (its exit code, or 128 plus the signal that
// ended it), and whether the box asks not to be used again.
func ParseResidentReply(b []byte) (status int, discard bool, err error) {
	status, discard, err = reswire.ParseReply(b)
	if err != nil {
		return 0, false, fmt.Errorf("sandbox: %w", err)
	}
	return status, discard, nil
}

// Environ is the box's whole environment as a sorted list of NAME=VALUE,
// HOME set from Home: what its commands get.
func (b Box) Environ() []string { return b.environ() }
