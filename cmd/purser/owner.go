package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// processStart returns a process's start time (in clock ticks since boot),
// which tells a live process from a later one that reused its pid.
func processStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || f[0] == "Z" {
		return ""
	}
	return f[19]
}

// ownerID identifies this process in task records: "host pid start".
func ownerID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s %d %s", host, os.Getpid(), processStart(os.Getpid()))
}

// ownerGone reports whether the process named by an owner ID is known to be
// gone: on this host, with no live process of that pid and start time. An
// owner on another host is not known to be gone.
func ownerGone(owner string) bool {
	f := strings.Fields(owner)
	if len(f) != 3 {
		return owner != "" // unreadable: treat as gone
	}
	if host, _ := os.Hostname(); f[0] != host {
		return false
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil {
		return true
	}
	return processStart(pid) != f[2]
}
