package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Signal sends sig to a boxed command's process group through the box's
// init, for a graceful stop: bwrap, which is cmd.Process, forwards no
// signal, so one sent to it ends the box at once, the command unwarned.
// cmd must have been made by Command and started. The init is found as
// bwrap's only child once it runs the init (its pid cannot be reused while
// bwrap, its parent, lives); Signal waits up to a second for the box to get
// that far, and returns an error if it does not — the caller then ends the
// box with cmd.Process.Kill.
func Signal(cmd *exec.Cmd, sig syscall.Signal) error {
	if cmd.Process == nil {
		return errors.New("sandbox: signalling a box not started")
	}
	bwrap := cmd.Process.Pid
	for end := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
		if pid, ok := initOf(bwrap); ok {
			if err := syscall.Kill(pid, sig); err != nil {
				return fmt.Errorf("sandbox: signalling the box's init (pid %d): %w", pid, err)
			}
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("sandbox: the box of bwrap pid %d has no init running", bwrap)
		}
	}
}

// initOf finds the child of bwrap that runs the box's init.
func initOf(bwrap int) (int, bool) {
	for _, pid := range childrenOf(bwrap) {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && bytes.HasPrefix(cmdline, []byte(initPath+"\x00"+initArg+"\x00")) {
			return pid, true
		}
	}
	return 0, false
}

// childrenOf lists pid's children: from /proc/PID/task/*/children where
// the kernel has it (each thread's own: a Go parent, such as Purser's
// supervisor, forks from any of its threads), else by the parent pid of
// every process.
func childrenOf(pid int) []int {
	p := strconv.Itoa(pid)
	var kids []int
	if tasks, err := os.ReadDir("/proc/" + p + "/task"); err == nil {
		found := false
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/" + p + "/task/" + task.Name() + "/children")
			if err != nil {
				continue
			}
			found = true
			for _, f := range strings.Fields(string(b)) {
				if k, err := strconv.Atoi(f); err == nil {
					kids = append(kids, k)
				}
			}
		}
		if found {
			return kids
		}
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		k, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == p {
			kids = append(kids, k)
		}
	}
	return kids
}

// SignalUnder sends sig to the command of a box started below root (bwrap
// itself, or a supervisor that started bwrap: internal/procgroup's), through
// the box's init, as Signal does. It looks a few generations down, and
// returns an error when no box's init runs there (the caller then stops
// the box hard).
func SignalUnder(root int, sig syscall.Signal) error {
	for end := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
		if pid, ok := initBelow(root, 3); ok {
			if err := syscall.Kill(pid, sig); err != nil {
				return fmt.Errorf("sandbox: signalling the box's init (pid %d): %w", pid, err)
			}
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("sandbox: no box's init runs below pid %d", root)
		}
	}
}

// initBelow finds a box's init among pid's descendants, depth generations
// down at most.
func initBelow(pid, depth int) (int, bool) {
	if p, ok := initOf(pid); ok {
		return p, true
	}
	if depth <= 1 {
		return 0, false
	}
	for _, kid := range childrenOf(pid) {
		if p, ok := initBelow(kid, depth-1); ok {
			return p, true
		}
	}
	return 0, false
}
