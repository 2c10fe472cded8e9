package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/internal/procgroup"
)

// Owners identifies processes by host, pid and start time ("host pid
// start"), read from /proc by procgroup.Stat: the start time tells a live process from a later
// one that reused its pid.
type Owners struct{}

var (
	_ purser.Owners         = Owners{}
	_ purser.LeftoverKiller = Owners{}
	_ purser.ProcessOwners  = Owners{}
)

// KillLeftovers kills what a call's process (as proc.Run gave it to
// CallHooks.Started) left running: its group, if its leader still runs,
// and every process below its supervisor, wherever it went.
func (Owners) KillLeftovers(process string) int { return procgroup.KillLeftovers(process) }

// Self is this process's owner ID.
func (Owners) Self() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s %d %s", host, os.Getpid(), liveStart(os.Getpid()))
}

// Gone reports whether the process an owner ID names is known to be gone: on
// this host, with no live process of that pid and start time. An owner on
// another host is not known to be gone; an unreadable one is taken as gone.
func (Owners) Gone(owner string) bool {
	f := strings.Fields(owner)
	if len(f) != 3 {
		return owner != ""
	}
	if host, _ := os.Hostname(); f[0] != host {
		return false
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil {
		return true
	}
	return liveStart(pid) != f[2]
}

// ProcessGone is Gone: an owner is gone only when its process is. A type
// embedding Owners that widens Gone (a worker whose lease ran out) keeps
// this, the process check.
func (o Owners) ProcessGone(owner string) bool { return o.Gone(owner) }

// liveStart is a process's start time, or "" when it is gone or a zombie.
func liveStart(pid int) string {
	p, ok := procgroup.Stat(pid)
	if !ok || p.State == "Z" {
		return ""
	}
	return p.Start
}
