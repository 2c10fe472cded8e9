package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// agentFixture is a task on the exec backend whose agent writes its pid to
// a file and then runs until stopped; with stubborn, it ignores SIGINT and
// SIGTERM.
func agentFixture(t *testing.T, stubborn bool) string {
	t.Helper()
	dir := t.TempDir()
	trap := ""
	if stubborn {
		trap = "trap '' INT TERM HUP\n"
	}
	files := map[string]string{
		"task.yaml": "id: slow\ngoal: Take a while.\nworkspace: ./ws\nbackend: {type: exec, command: [sh, ../agent.sh]}\n" +
			"validators: [{name: never, run: 'exit 1'}]\nbudget: {hard: {maxIterations: 5}}\n",
		"agent.sh":  trap + "echo $$ > ../agent.pid\nwhile true; do sleep 0.1; done\n",
		"ws/README": "x\n",
		// The agent writes its host pid outside its workspace, for the test
		// to watch: it runs unboxed, as these tests were written for.
		"purser.yaml": "sandbox: off\n",
	}
	writeFiles(t, dir, files)
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// agentPid waits for the agent to write its pid.
func agentPid(t *testing.T, dir string) int {
	t.Helper()
	var pid int
	waitFor(t, 30*time.Second, "the agent never started", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "agent.pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	return pid
}

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && !strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}

// startAgentRun starts purser on agentFixture(stubborn) and waits for the
// agent to start; it returns the run's directory, the purser process and
// the agent's pid. The agent is killed when the test ends, whatever purser
// did to it.
func startAgentRun(t *testing.T, bin string, stubborn bool) (dir string, cmd purserProcess, pid int) {
	t.Helper()
	dir = agentFixture(t, stubborn)
	cmd = startPurser(t, bin, dir, "run", "task.yaml")
	pid = agentPid(t, dir)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return dir, cmd, pid
}

// A second signal quits at once, and takes the agent with it: an agent that
// ignores the graceful signal does not outlive Purser.
func TestSecondSignalKillsTheAgent(t *testing.T) {
	bin := buildPurser(t)
	_, cmd, pid := startAgentRun(t, bin, true)
	// Two different signals: two of one kind sent at once may be merged by
	// the kernel into one.
	must(t, cmd.Process.Signal(syscall.SIGINT))
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	if code := exitCode(t, cmd.Wait()); code != exitInterrupted {
		t.Fatalf("exit %d, want %d", code, exitInterrupted)
	}
	waitFor(t, 10*time.Second, "the agent outlived purser", func() bool { return !alive(pid) })
}

// SIGHUP (a closed terminal, a lost SSH session) stops the run gracefully,
// like SIGINT: the agent stopped, the task resumable, exit 130.
func TestHangupStopsGracefully(t *testing.T) {
	bin := buildPurser(t)
	dir, cmd, pid := startAgentRun(t, bin, false)
	must(t, cmd.Process.Signal(syscall.SIGHUP))
	if code := exitCode(t, cmd.Wait()); code != exitInterrupted {
		t.Fatalf("exit %d, want %d", code, exitInterrupted)
	}
	if state, _ := taskState(t, bin, dir); state != "PENDING" {
		t.Fatalf("state %s, want PENDING (resumable)", state)
	}
	waitFor(t, 10*time.Second, "the agent outlived purser", func() bool { return !alive(pid) })
}
