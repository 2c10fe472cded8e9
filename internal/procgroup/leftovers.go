package procgroup

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ID names the group's leader for a later process: "PID START", its pid and
// start time, so that a pid reused since is never taken for it.
func (g *Group) ID() string {
	if g.start != "" {
		return strconv.Itoa(g.pgid) + " " + g.start
	}
	p, _ := Stat(g.pgid)
	return strconv.Itoa(g.pgid) + " " + p.Start
}

// KillLeftovers kills what a group (named by its ID) left running: the
// group, if its leader is still the same process, and every process that
// carries the supervisor's mark of that leader in its environment, the ones
// that left the group or the session included. It returns how many
// processes it found; a malformed ID finds none.
func KillLeftovers(id string) int {
	f := strings.Fields(id)
	if len(f) != 2 {
		return 0
	}
	pgid, err := strconv.Atoi(f[0])
	if err != nil || pgid <= 1 {
		return 0
	}
	found := 0
	if p, ok := Stat(pgid); ok && p.State != "Z" && p.Start == f[1] && p.PGID == pgid {
		found++
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	mark := []byte(MarkEnv + "=" + id)
	// A process caught in the middle of exec shows no environment for a
	// moment: one empty scan is not proof that none is left (seen under
	// load: a child the agent forked as it was killed turned up after).
	quiet := 0
	for i := 0; i < 100 && quiet < 3; i++ {
		marked := markedWith(mark)
		if len(marked) == 0 {
			quiet++
			time.Sleep(5 * time.Millisecond)
			continue
		}
		quiet = 0
		found += len(marked)
		for _, pid := range marked {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return found
}

// markedWith lists the live processes whose environment holds mark.
func markedWith(mark []byte) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, mark) {
				if p, ok := Stat(pid); ok && p.State != "Z" {
					out = append(out, pid)
				}
				break
			}
		}
	}
	return out
}
