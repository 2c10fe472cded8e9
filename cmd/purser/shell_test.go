package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/config"
)

// realKey is the provider key Purser holds; the agent must never see it.
const realKey = "sk-ant-real-key-for-the-shell-test"

// sideCall is what the shared mock bills a request without tools: 50 in,
// 3 out (its README's table).
const sideCall = 50 + 3

// shellSession is a purser shell process with its stdin and stdout in the
// test's hands: the terminal of an interactive agent.
type shellSession struct {
	t      *testing.T
	dir    string // the project; ws/ is the working directory
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *lockedBuffer
	ready  string // the agent's first line
}

// lockedBuffer is Purser's stderr as the test reads it while it is written.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startShell starts `purser shell FLAGS -- agent.py` in a new project whose
// purser.yaml has a type: agent backend "mock" in front of upstream, with
// the project's sandbox: set to box; the agent writes what it saw to
// ws/seen.json (the box shows it nothing else of ours). Its stdin and
// stdout are pipes.
func startShell(t *testing.T, upstream, box string, flags ...string) *shellSession {
	t.Helper()
	s := newShell(t, upstream, box, flags...)
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = s.stderr
	s.start(out)
	return s
}

// newShell is the session's project and command, not started.
func newShell(t *testing.T, upstream, box string, flags ...string) *shellSession {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("testdata/shell/agent.py")
	if err != nil {
		t.Fatal(err)
	}
	agentPath := filepath.Join(dir, "agent.py")
	if err := os.WriteFile(agentPath, src, 0o755); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf("sandbox: %s\nbackends:\n  mock:\n    type: agent\n    wire: anthropic\n    command: [unused]\n    upstream: %s\n    key: {env: PURSER_TEST_REAL_KEY}\n    env: {AGENT_SEEN: %s}\n",
		box, upstream, filepath.Join(ws, "seen.json"))
	if err := os.WriteFile(filepath.Join(ws, "purser.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"shell", "--backend", "mock"}, flags...), "--", agentPath)
	cmd := exec.Command(buildPurser(t), args...)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(dir, ".state"), "PURSER_TEST_REAL_KEY="+realKey)
	return &shellSession{t: t, dir: dir, cmd: cmd, lines: make(chan string, 100), stderr: &lockedBuffer{}}
}

// start starts the session and reads the agent's lines ("agent: ...")
// from out until the agent is ready.
func (s *shellSession) start(out io.Reader) {
	s.t.Helper()
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = s.cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := strings.TrimRight(sc.Text(), "\r")
			if i := strings.Index(l, "agent: "); i >= 0 {
				s.lines <- l[i:]
			} else {
				_, _ = s.stderr.Write([]byte(l + "\n")) // on a terminal, Purser's lines and the echo
			}
		}
		close(s.lines)
	}()
	s.ready = s.expect("agent: ready")
}

// expect waits for the agent's next line and checks it starts with want.
func (s *shellSession) expect(want string) string {
	s.t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			s.t.Fatalf("the session ended before %q; stderr:\n%s", want, s.stderr)
		}
		if !strings.HasPrefix(l, want) {
			s.t.Fatalf("the agent said %q, want %q; stderr:\n%s", l, want, s.stderr)
		}
		return l
	case <-time.After(60 * time.Second):
		s.t.Fatalf("no %q from the agent in 60 s; stderr:\n%s", want, s.stderr)
	}
	return ""
}

// say types a line to the agent.
func (s *shellSession) say(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.stdin, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

// exit waits for purser to end and returns its exit code.
func (s *shellSession) exit() int {
	s.t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			s.t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		s.t.Fatalf("purser shell did not end in 30 s; stderr:\n%s", s.stderr)
	}
	return -1
}

// task is the session's task as purser status shows it.
func (s *shellSession) task() sharedTask {
	s.t.Helper()
	var stdout, stderr bytes.Buffer
	s.t.Setenv("XDG_STATE_HOME", filepath.Join(s.dir, ".state"))
	db := config.DefaultDatabase(filepath.Join(s.dir, "ws"))
	cmd := exec.Command(buildPurser(s.t), "status", "--json", "--db", db)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("status: %v %s", err, stderr.String())
	}
	var got struct{ Tasks []sharedTask }
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || len(got.Tasks) != 1 {
		s.t.Fatalf("status: %v %s", err, stdout.String())
	}
	return got.Tasks[0]
}

// checkKeyHeld fails when the agent saw the real key.
func (s *shellSession) checkKeyHeld() {
	s.t.Helper()
	seen, err := os.ReadFile(filepath.Join(s.dir, "ws", "seen.json"))
	if err != nil {
		s.t.Fatalf("the agent did not say what it saw: %v", err)
	}
	if bytes.Contains(seen, []byte(realKey)) {
		s.t.Error("the real key reached the agent's environment")
	}
	var env struct{ Key string }
	if err := json.Unmarshal(seen, &env); err != nil || env.Key == "" {
		s.t.Errorf("the agent got no scoped token: %v %s", err, seen)
	}
	if strings.Contains(s.stderr.String(), realKey) {
		s.t.Error("the real key was printed")
	}
}

// Issue 21, interactive: `purser shell` runs an agent on the user's
// terminal through the door under a session cap. What the user types
// reaches the agent; each of its requests is booked exactly from the door;
// the request that would cross the hard cap is refused in Anthropic's own
// error shape, and the session ends BLOCKED without the agent's consent,
// with BUDGET.md and STATUS.md written; the agent never sees the real key.
// Boxed too, where bubblewrap is available.
func TestShellCapEndsTheSessionBlocked(t *testing.T) {
	mock := backendtest.StartMock(t)
	for _, box := range []string{"off", "on"} {
		t.Run("sandbox "+box, func(t *testing.T) {
			if box == "on" {
				requireBox(t)
			}
			s := startShell(t, mock, box, "--tokens", "400")
			replies := 0
			for i := 0; ; i++ {
				if i > 20 {
					t.Fatal("no refusal after 20 requests under a 400-token cap")
				}
				s.say(fmt.Sprintf("question %d", i))
				l := s.expect("agent: ")
				if strings.HasPrefix(l, "agent: reply") {
					replies++
					continue
				}
				if !strings.HasPrefix(l, "agent: HTTP 402 ") || !strings.Contains(l, `"type":"error"`) ||
					!strings.Contains(l, "purser: budget exhausted (hard tokens 400)") {
					t.Fatalf("the refusal: %s; want a 402 in Anthropic's error shape naming the cap", l)
				}
				break
			}
			// The agent does not exit by itself: Purser ends the session.
			if code := s.exit(); code != exitBudgetStop {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitBudgetStop, s.stderr)
			}
			tk := s.task()
			if tk.Status != "BLOCKED" || tk.Budget.UsedTokens != int64(replies*sideCall) || replies < 5 {
				t.Errorf("task %+v after %d replies; want BLOCKED with %d tokens", tk, replies, replies*sideCall)
			}
			for _, f := range []string{"BUDGET.md", "STATUS.md"} {
				if b, err := os.ReadFile(filepath.Join(s.dir, "ws", f)); err != nil || !bytes.Contains(b, []byte("BLOCKED")) {
					t.Errorf("%s: %v\n%s", f, err, b)
				}
			}
			if !strings.Contains(s.stderr.String(), "purser: WARNING: the session's budget is past its warning line") {
				t.Errorf("no WARNING on stderr:\n%s", s.stderr)
			}
			s.checkKeyHeld()
			// A session has no task file: resume refuses it, saying so.
			var stderr bytes.Buffer
			resume := exec.Command(buildPurser(t), "resume", tk.ID, "--db", config.DefaultDatabase(filepath.Join(s.dir, "ws")))
			resume.Stderr = &stderr
			var ee *exec.ExitError
			if err := resume.Run(); !errors.As(err, &ee) || ee.ExitCode() != exitBadInput || !strings.Contains(stderr.String(), "a purser shell session is not resumed") {
				t.Errorf("resume of a shell session: %v, stderr %q; want exit %d saying a session is not resumed", err, stderr.String(), exitBadInput)
			}
		})
	}
}

// A session the agent ends with exit 0 under its caps is DONE; Ctrl-C is
// the agent's (it gets SIGINT and carries on), not Purser's.
func TestShellDoneWhenTheAgentExits(t *testing.T) {
	mock := backendtest.StartMock(t)
	s := startShell(t, mock, "off", "--usd", "1")
	s.say("hello")
	s.expect("agent: reply done")
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	s.expect("agent: got SIGINT x1, carrying on")
	s.say("again")
	s.expect("agent: reply done")
	s.say("exit 0")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, s.stderr)
	}
	if tk := s.task(); tk.Status != "DONE" || tk.Budget.UsedTokens != 2*sideCall {
		t.Errorf("task %+v; want DONE with %d tokens", tk, 2*sideCall)
	}
	s.checkKeyHeld()
}

// A second Ctrl-C within a moment, or SIGTERM, ends the session: the agent
// is stopped although it would carry on, and Purser exits 130.
func TestShellEndsOnSecondCtrlCOrSIGTERM(t *testing.T) {
	mock := backendtest.StartMock(t)
	for _, signals := range [][]syscall.Signal{{syscall.SIGINT, syscall.SIGINT}, {syscall.SIGTERM}} {
		t.Run(signals[len(signals)-1].String()+fmt.Sprint(len(signals)), func(t *testing.T) {
			s := startShell(t, mock, "off", "--tokens", "100000")
			s.say("hello")
			s.expect("agent: reply done")
			for _, sig := range signals {
				if err := s.cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if code := s.exit(); code != exitInterrupted {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitInterrupted, s.stderr)
			}
			if !strings.Contains(s.stderr.String(), "ending the session") {
				t.Errorf("stderr does not say the session was ended:\n%s", s.stderr)
			}
			if tk := s.task(); tk.Budget.UsedTokens != sideCall || tk.Status == "DONE" {
				t.Errorf("task %+v; want %d tokens, not DONE", tk, sideCall)
			}
		})
	}
}

// On a real terminal (a pseudo-terminal here, Purser its session leader)
// the agent reads what is typed and gets the terminal's Ctrl-C once:
// unboxed, from the terminal itself, as it shares the terminal's
// foreground process group (Purser does not send it a second time); boxed,
// in a session of its own, from Purser. Two Ctrl-C end the session.
func TestShellOnATerminal(t *testing.T) {
	mock := backendtest.StartMock(t)
	for _, box := range []string{"off", "on"} {
		t.Run("sandbox "+box, func(t *testing.T) {
			if box == "on" {
				requireBox(t)
			}
			master, slave := openPTY(t)
			s := newShell(t, mock, box, "--tokens", "100000")
			s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = slave, slave, slave
			s.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			s.stdin = master
			s.start(master)
			slave.Close()
			// Unboxed, the agent is in the terminal's foreground group (a
			// background one could not read it); boxed, it has no
			// controlling terminal at all.
			if fg := s.ready == "agent: ready, foreground"; fg != (box == "off") {
				t.Errorf("the agent in the terminal's foreground group: %v, want %v", fg, box == "off")
			}
			s.say("hello")
			s.expect("agent: reply done")
			s.say("\x03")
			s.expect("agent: got SIGINT x1, carrying on")
			s.say("again")
			// One SIGINT, not two: the next line is the reply (a second one
			// the kernel merged with the first would go unseen here; the
			// agent counts each it gets at the C level).
			s.expect("agent: reply done")
			if _, err := master.WriteString("\x03"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
			if _, err := master.WriteString("\x03"); err != nil {
				t.Fatal(err)
			}
			if code := s.exit(); code != exitInterrupted {
				t.Fatalf("exit %d, want %d; the terminal showed:\n%s", code, exitInterrupted, s.stderr)
			}
			if tk := s.task(); tk.Budget.UsedTokens != 2*sideCall {
				t.Errorf("task %+v; want %d tokens", tk, 2*sideCall)
			}
		})
	}
}

// openPTY opens a pseudo-terminal: its master, and its slave for the
// process under test. It skips the test where there is none.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skip("no pseudo-terminal:", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal("unlocking the pseudo-terminal:", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal("the pseudo-terminal's number:", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skip("no pseudo-terminal:", err)
	}
	return master, slave
}

// Fail closed, as purser run: the project's sandbox is on and no box can
// be made (no bwrap on the PATH), so nothing runs — the agent is not
// started unboxed — and the user is told why (exit 2).
func TestShellFailsClosedWithoutABox(t *testing.T) {
	for _, project := range []string{"sandbox: on\n", "# no sandbox: key: on by default\n"} {
		shellFailsClosedWithoutABox(t, project)
	}
}

func shellFailsClosedWithoutABox(t *testing.T, project string) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	ran := filepath.Join(dir, "ran")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "purser.yaml"), []byte(project), 0o600); err != nil {
		t.Fatal(err)
	}
	agentPath := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(agentPath, []byte("#!/bin/sh\n: > "+ran+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(buildPurser(t), "shell", "--tokens", "1000", "--", agentPath)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "PATH=/nonexistent", "XDG_STATE_HOME="+filepath.Join(dir, ".state"), "ANTHROPIC_API_KEY=sk-test")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitBadInput {
		t.Fatalf("%q: exit %v, want %d\n%s", project, err, exitBadInput, out)
	}
	if !strings.Contains(string(out), "sandbox is on but no box can be made here") || !strings.Contains(string(out), "nothing was run") {
		t.Errorf("the refusal does not say why:\n%s", out)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the agent ran unboxed")
	}
}

// The time cap: the agent sits idle (its user thinking), making no request
// and so no event; the WARNING line on time is said when it passes, and at
// the cap the session ends BLOCKED, the agent stopped.
func TestShellTimeCap(t *testing.T) {
	mock := backendtest.StartMock(t)
	s := startShell(t, mock, "off", "--time", "3s")
	start := time.Now()
	if code := s.exit(); code != exitBudgetStop {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitBudgetStop, s.stderr)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("the session ended after %s, before its 3 s cap", took)
	}
	if !strings.Contains(s.stderr.String(), "purser: WARNING: the session's budget is past its warning line on time (2.4s used)") {
		t.Errorf("no WARNING on time:\n%s", s.stderr)
	}
	if tk := s.task(); tk.Status != "BLOCKED" || !strings.Contains(tk.Reason, "time") {
		t.Errorf("task %+v; want BLOCKED on time", tk)
	}
}
