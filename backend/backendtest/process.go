package backendtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pidsFile is where a process agent records itself and its helpers: one
// line per process, "role pid pgid starttime".
const pidsFile = "pids"

// procStat returns a live process's process group and start time (fields 5
// and 22 of /proc/pid/stat); ok is false when it is gone or a zombie, which
// holds nothing and does nothing.
func procStat(pid int) (pgid int, start string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	// The command name is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0, "", false
	}
	pgid, err = strconv.Atoi(f[2])
	return pgid, f[19], err == nil
}

func record(role string, pid int) string {
	pgid, start, _ := procStat(pid)
	return fmt.Sprintf("%s %d %d %s", role, pid, pgid, start)
}

type agentProcess struct {
	role      string
	pid, pgid int
	start     string
}

func readPIDs(t *testing.T, state string) []agentProcess {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(state, pidsFile))
	if err != nil {
		t.Fatalf("the scripted agent never recorded its process ids: %v", err)
	}
	var out []agentProcess
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 {
			t.Fatalf("%s: bad record %q", pidsFile, l)
		}
		pid, err1 := strconv.Atoi(f[1])
		pgid, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: bad record %q", pidsFile, l)
		}
		if f[0] == "agent" && pgid != pid {
			t.Fatalf("the agent (pid %d) was started in process group %d, not a group of its own: the backend cannot stop its group", pid, pgid)
		}
		out = append(out, agentProcess{role: f[0], pid: pid, pgid: pgid, start: f[3]})
	}
	return out
}

// survivors returns what is still alive of the agent: its recorded
// processes (the same ones: a reused pid does not count), and any live
// process in the agent's process group.
func survivors(procs []agentProcess) []string {
	var left []string
	groups := map[int]bool{}
	for _, p := range procs {
		if p.role == "agent" {
			groups[p.pgid] = true
		}
		if _, start, ok := procStat(p.pid); ok && start == p.start {
			left = append(left, fmt.Sprintf("%s (pid %d)", p.role, p.pid))
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pgid, _, ok := procStat(pid); ok && groups[pgid] {
			left = append(left, fmt.Sprintf("pid %d in the agent's process group %d", pid, pgid))
		}
	}
	return left
}

// requireProcessesGone waits, up to bound, until nothing of the agent is
// left alive; then it fails the test naming what is, and kills it.
func requireProcessesGone(t *testing.T, state string, bound time.Duration) {
	t.Helper()
	procs := readPIDs(t, state)
	deadline := time.Now().Add(bound)
	left := survivors(procs)
	for len(left) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		left = survivors(procs)
	}
	if len(left) == 0 {
		return
	}
	t.Errorf("%s after the call returned, still alive: %s", bound, strings.Join(left, ", "))
	for _, p := range procs {
		if _, start, ok := procStat(p.pid); ok && start == p.start {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	for _, p := range procs {
		if p.role == "agent" {
			_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		}
	}
}
