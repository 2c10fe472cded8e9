package supervisor

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/purser-dev/purser/internal/reswire"
)

// ServeArg is the hidden first argument that runs a binary as a resident
// supervisor: `BINARY __purser_supervise_serve LIFEFD SOCKFD`. Started once
// per workspace, it runs one command after another on request over the
// socket (internal/reswire's wire), so that an unboxed validator costs a
// fork and exec of its command, not a Go start-up (issue 24). Each command
// runs in its own process group with MarkEnv in its environment; when it
// has ended, the supervisor kills and reaps everything it left below
// itself — a subreaper, it holds a setsid double fork's orphans too —
// before it replies. It ends, and everything below it, at the lifeline's
// end of file or the socket's.
const ServeArg = "__purser_supervise_serve"

// runStop is how long a resident supervisor's clean-up after one command
// may take before it gives up and asks to be discarded.
const runStop = 2 * time.Second

// Serve is the resident supervisor (ServeArg); args are LIFEFD SOCKFD. It
// returns its exit code.
func Serve(args []string) int {
	if len(args) != 2 {
		fmt.Fprintf(os.Stderr, "purser supervisor: want %s LIFEFD SOCKFD, got %q\n", ServeArg, args)
		return 2
	}
	life, err1 := strconv.Atoi(args[0])
	sock, err2 := strconv.Atoi(args[1])
	if err1 != nil || err2 != nil || life < 3 || sock < 3 {
		fmt.Fprintf(os.Stderr, "purser supervisor: %q are not file descriptors above 2\n", args)
		return 2
	}
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0, 0, 0, 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "purser supervisor: becoming a subreaper: %v\n", errno)
		return 2
	}
	syscall.CloseOnExec(life)
	syscall.CloseOnExec(sock)
	parentGone := make(chan struct{})
	go func() {
		var b [1]byte
		_, _ = os.NewFile(uintptr(life), "lifeline").Read(b[:]) // EOF: Purser closed it, or died
		close(parentGone)
	}()
	s := &server{sock: sock, parent: os.Getppid(), parentGone: parentGone, msgs: make(chan message, 4),
		sigs: make(chan os.Signal, 8)}
	signal.Notify(s.sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, DeathSignal)
	self, _ := Stat(os.Getpid())
	s.mark = MarkEnv + "=" + strconv.Itoa(os.Getpid()) + " " + self.Start
	go reswire.ReadMessages(sock, "purser supervisor", s.msgs)
	if err := syscall.Sendto(sock, []byte(reswire.MsgReady), 0, nil); err != nil {
		return 2
	}
	return s.loop()
}

// server is a resident supervisor's state.
type server struct {
	sock       int
	parent     int
	mark       string // MarkEnv=…, on every command's environment
	parentGone <-chan struct{}
	msgs       chan message
	sigs       chan os.Signal
}

// message is what reswire.ReadMessages reads: a run request, or a stop byte.
type message = reswire.Message

// loop serves requests until Purser is gone.
func (s *server) loop() int {
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				return s.end(0)
			}
			if m.Files == nil {
				continue // a stop that came after its command ended
			}
			status, discard := s.runOne(m)
			if err := syscall.Sendto(s.sock, reswire.Reply(status, discard), 0, nil); err != nil || discard {
				return s.end(0)
			}
		case <-s.parentGone:
			return s.end(137)
		case sig := <-s.sigs:
			if sig != DeathSignal || os.Getppid() != s.parent {
				return s.end(128 + int(sig.(syscall.Signal)))
			}
		}
	}
}

// end kills everything below the supervisor and returns code.
func (s *server) end(code int) int {
	clearBelow(time.Second)
	return code
}

// runOne runs m to its end, then kills and reaps whatever it left. It
// returns the command's status as a shell gives it, and whether the
// supervisor is to be discarded.
func (s *server) runOne(m message) (status int, discard bool) {
	defer func() {
		for _, f := range m.Files {
			f.Close()
		}
	}()
	stderr := m.Files[2]
	path, err := reswire.LookPathIn(m.Argv[0], reswire.EnvPath(m.Env))
	if err != nil {
		fmt.Fprintf(stderr, "purser supervisor: %v\n", err)
		return 127, false
	}
	env := append(m.Env[:len(m.Env):len(m.Env)], s.mark)
	// Said before the start, not after: a supervisor that dies in between
	// must not have its command taken for one never run, and run again.
	_ = syscall.Sendto(s.sock, []byte(reswire.MsgStarted), 0, nil)
	p, err := os.StartProcess(path, m.Argv, &os.ProcAttr{Dir: m.Dir, Env: env, Files: m.Files,
		Sys: &syscall.SysProcAttr{Setpgid: true}})
	if err != nil {
		fmt.Fprintf(stderr, "purser supervisor: starting %s: %v\n", m.Argv[0], err)
		return 126, false
	}
	pid := p.Pid
	_ = p.Release() // reaped by waitFor's wait4 loop, not by os.Process
	status, gone := s.waitOne(pid)
	if !clearBelow(runStop) {
		fmt.Fprintf(stderr, "purser supervisor: processes left by the command could not be ended\n")
		return status, true
	}
	return status, gone
}

// waitOne waits for the command pid, passing on stops. gone is true when
// Purser is gone: the command was stopped as an owner's death stops it.
func (s *server) waitOne(pid int) (status int, gone bool) {
	done := make(chan int, 1)
	go func() {
		status, err := reswire.WaitFor(pid)
		if err != nil {
			status = 126
		}
		done <- status
	}()
	for {
		select {
		case status := <-done:
			return status, false
		case m, ok := <-s.msgs:
			switch {
			case !ok:
				return s.stopAfterOwner(pid, done), true
			case m.Stop == reswire.MsgTerm:
				_ = syscall.Kill(-pid, syscall.SIGTERM)
			case m.Stop == reswire.MsgKill:
				killTree()
			case m.Files != nil: // one at a time: refused
				fmt.Fprintf(m.Files[2], "purser supervisor: busy\n")
				for _, f := range m.Files {
					f.Close()
				}
			}
		case <-s.parentGone:
			return s.stopAfterOwner(pid, done), true
		case sig := <-s.sigs:
			if sig != DeathSignal || os.Getppid() != s.parent {
				return s.stopAfterOwner(pid, done), true
			}
		}
	}
}

// stopAfterOwner gives the running command the grace (GraceEnv) to exit
// once Purser is gone, then kills it; the caller kills what is left.
func (s *server) stopAfterOwner(pid int, done <-chan int) int {
	deadline := time.Now().Add(maxGrace)
	for _, st := range graceOf(os.Getenv(GraceEnv)) {
		if st.sig != 0 {
			_ = syscall.Kill(-pid, st.sig)
		}
		select {
		case status := <-done:
			return status
		case <-time.After(min(st.wait, time.Until(deadline))):
		}
	}
	killTree()
	return <-done
}

// killTree sends SIGKILL once to every live process below the supervisor.
// It returns how many it found.
func killTree() int {
	live := 0
	for pid := range Tree(os.Getpid()) {
		if p, ok := Stat(pid); ok && p.State != "Z" {
			live++
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return live
}

// clearBelow kills and reaps every process below the supervisor, reading
// its tree again until none is left (a process may fork while its siblings
// are killed; orphans come back to the supervisor, their subreaper), for at
// most d. It reports whether none is left.
func clearBelow(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		reapAll()
		if killTree() == 0 {
			reapAll()
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// reapAll reaps every child that has exited, without waiting for others.
func reapAll() {
	for {
		got, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || got <= 0 {
			return
		}
	}
}
