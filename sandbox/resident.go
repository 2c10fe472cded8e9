package sandbox

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/purser-dev/purser/sandbox/internal/boxinit"
)

// The client's side of a resident box's wire (Box.Serve; the wire is
// documented in internal/boxinit/serve.go): a caller writes these on its end
// of the socket pair, one datagram each.
const (
	// ResidentReady is what the box's init sends once it is set up.
	ResidentReady = boxinit.MsgReady
	// ResidentStarted is what the box's init sends once a command has
	// started: a box that ends before saying so never ran it.
	ResidentStarted = boxinit.MsgStarted
	// ResidentStale is what the box's init sends instead, not starting the
	// command, when the command's directory was removed since the box was
	// made: the box ends, and the command may run in a new one.
	ResidentStale = boxinit.MsgStale
	// ResidentTerm asks the box to send SIGTERM to the running command's
	// process group.
	ResidentTerm = boxinit.MsgTerm
	// ResidentKill asks the box to SIGKILL every process in it but its
	// init.
	ResidentKill = boxinit.MsgKill
)

// ResidentRequest is the datagram asking a resident box to run argv in dir
// with env; it goes with three descriptors in an SCM_RIGHTS message: the
// command's stdin, stdout and stderr.
func ResidentRequest(dir string, argv, env []string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("sandbox: no command to run")
	}
	var p bytes.Buffer
	p.WriteByte(boxinit.MsgRun)
	for _, group := range [][]string{{dir, strconv.Itoa(len(argv))}, argv, env} {
		for _, f := range group {
			if strings.IndexByte(f, 0) >= 0 {
				return nil, fmt.Errorf("sandbox: a NUL byte in the request's %q", f)
			}
			p.WriteString(f)
			p.WriteByte(0)
		}
	}
	if p.Len() > boxinit.MaxRequest {
		return nil, fmt.Errorf("sandbox: a request of %d bytes, more than a resident box reads (%d)", p.Len(), boxinit.MaxRequest)
	}
	return p.Bytes(), nil
}

// ParseResidentReply reads a resident box's reply to a run: the command's
// status as a shell gives it (its exit code, or 128 plus the signal that
// ended it), and whether the box asks not to be used again.
func ParseResidentReply(b []byte) (status int, discard bool, err error) {
	s, discard := strings.CutSuffix(string(b), boxinit.ReplyDiscard)
	status, err = strconv.Atoi(s)
	if err != nil || status < 0 {
		return 0, false, fmt.Errorf("sandbox: not a resident box's reply: %q", b)
	}
	return status, discard, nil
}

// Environ is the box's whole environment as a sorted list of NAME=VALUE,
// HOME set from Home: what its commands get.
func (b Box) Environ() []string { return b.environ() }
