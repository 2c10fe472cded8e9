//go:build !linux

package sandbox

import (
	"os/exec"
	"syscall"
)

// Signal sends sig to a boxed command; there are no boxes here (see
// Available).
func Signal(cmd *exec.Cmd, sig syscall.Signal) error { return Available() }

// SignalUnder is Signal for a box started below root; there is no box here.
func SignalUnder(root int, sig syscall.Signal) error { return Available() }
