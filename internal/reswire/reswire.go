// Package reswire is the wire between Purser and a resident runner of its
// validators — a resident box's init (sandbox/internal/boxinit) or a
// resident supervisor (internal/procgroup/supervisor) — and the little else
// both runners share (reading the wire, reaping). Both are Purser's own
// binary, so the wire is internal and may change with it (issue 24). It is
// a SOCK_SEQPACKET unix socket pair, one datagram a message:
//
//   - runner → Purser, once set up: "ready".
//   - Purser → runner, run: 'R' then NUL-separated fields: the working
//     directory, the argument count, the arguments, the environment; with
//     SCM_RIGHTS, exactly three descriptors: the command's stdin, stdout and
//     stderr. One command runs at a time.
//   - runner → Purser: "started" once the command has started (a runner
//     that ends before saying so never ran it), or "stale" instead when a
//     box's bound directory was removed since the box was made.
//   - Purser → runner, while a command runs: "T" sends SIGTERM to its
//     process group; "K" SIGKILLs every process the runner holds.
//   - runner → Purser, when the command has ended and every process it left
//     has been killed and reaped: its status as a shell gives it (the exit
//     code, or 128 plus the signal), followed by " discard" when the runner
//     should not be used again.
//
// The runner ends at the socket's end of file, and at its lifeline's.
//
// Both runners are started from early package inits, before the rest of
// the program is initialised, so this package imports only standard
// library packages the runtime initialises first (imports_test.go).
package reswire

import (
	"errors"
	"os"
	"strconv"
	"syscall"
)

// Message bytes of the wire.
const (
	MsgReady   = "ready"
	MsgStarted = "started"
	MsgStale   = "stale"
	MsgRun     = 'R'
	MsgTerm    = 'T'
	MsgKill    = 'K'
	// ReplyDiscard follows a reply's status when the runner is not to be
	// used again.
	ReplyDiscard = " discard"
)

// MaxRequest is the largest request a runner reads: well within a unix
// socket's default send buffer, which bounds a datagram (a larger
// environment runs its validators the per-run way).
const MaxRequest = 64 << 10

// Request is the datagram asking a runner to run argv in dir with env; it
// goes with three descriptors in an SCM_RIGHTS message: the command's
// stdin, stdout and stderr.
func Request(dir string, argv, env []string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command to run")
	}
	p := []byte{MsgRun}
	for _, group := range [][]string{{dir, strconv.Itoa(len(argv))}, argv, env} {
		for _, f := range group {
			for i := 0; i < len(f); i++ {
				if f[i] == 0 {
					return nil, errors.New("a NUL byte in the request's " + strconv.Quote(f))
				}
			}
			p = append(p, f...)
			p = append(p, 0)
		}
	}
	if len(p) > MaxRequest {
		return nil, errors.New("a request of " + strconv.Itoa(len(p)) + " bytes, more than a resident runner reads (" +
			strconv.Itoa(MaxRequest) + ")")
	}
	return p, nil
}

// ParseRequest reads a run request's payload (without its 'R').
func ParseRequest(p []byte) (dir string, argv, env []string, err error) {
	var fields []string
	from := 0
	for i := 0; i < len(p); i++ {
		if p[i] == 0 {
			fields = append(fields, string(p[from:i]))
			from = i + 1
		}
	}
	if from != len(p) || len(fields) < 3 {
		return "", nil, nil, errors.New("malformed request")
	}
	n, err := strconv.Atoi(fields[1])
	if err != nil || n < 1 || n > len(fields)-2 {
		return "", nil, nil, errors.New("malformed request: argument count")
	}
	return fields[0], fields[2 : 2+n], fields[2+n:], nil
}

// Reply is a runner's reply to a run: status, and ReplyDiscard when
// discard.
func Reply(status int, discard bool) []byte {
	b := strconv.AppendInt(nil, int64(status), 10)
	if discard {
		b = append(b, ReplyDiscard...)
	}
	return b
}

// ParseReply reads a runner's reply to a run: the command's status as a
// shell gives it, and whether the runner asks not to be used again.
func ParseReply(b []byte) (status int, discard bool, err error) {
	s := string(b)
	if n := len(s) - len(ReplyDiscard); n >= 0 && s[n:] == ReplyDiscard {
		s, discard = s[:n], true
	}
	status, err = strconv.Atoi(s)
	if err != nil || status < 0 {
		return 0, false, errors.New("not a resident runner's reply: " + strconv.Quote(string(b)))
	}
	return status, discard, nil
}

// Rights returns the descriptors an SCM_RIGHTS control message carried.
func Rights(oob []byte) []*os.File {
	cmsgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var files []*os.File
	for _, m := range cmsgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "fd"))
		}
	}
	return files
}

// LookPathIn finds name as os/exec's LookPath does with path for $PATH,
// without the package (it initialises late): name itself when it holds a
// slash, else the first file in path this process may execute; one found
// through a relative entry is refused, as LookPath refuses it (exec.ErrDot).
func LookPathIn(name, path string) (string, error) {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			return name, executable(name)
		}
	}
	from := 0
	for i := 0; i <= len(path); i++ {
		if i < len(path) && path[i] != ':' {
			continue
		}
		dir := path[from:i]
		from = i + 1
		if dir == "" {
			dir = "."
		}
		if executable(dir+"/"+name) != nil {
			continue
		}
		if dir[0] != '/' {
			return "", errors.New("exec: " + strconv.Quote(name) + ": cannot run executable found relative to current directory")
		}
		return dir + "/" + name, nil
	}
	return "", errors.New("exec: " + strconv.Quote(name) + ": executable file not found in $PATH")
}

// executable is nil when path is a regular file this process may execute.
func executable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return errors.New(path + ": not a regular file")
	}
	const xOK = 1 // access(2)'s X_OK
	return syscall.Access(path, xOK)
}

// EnvPath is $PATH in env (the last one set).
func EnvPath(env []string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if len(env[i]) >= 5 && env[i][:5] == "PATH=" {
			return env[i][5:]
		}
	}
	return ""
}

// Message is one message to a runner as ReadMessages reads it: a run
// request (Files: the command's stdin, stdout and stderr) or, with Files
// nil, a stop byte.
type Message struct {
	Dir       string
	Argv, Env []string
	Files     []*os.File
	Stop      byte
}

// ReadMessages reads sock's messages into msgs until the socket's end
// (Purser closed it, or died) or a message not of the wire, then closes
// msgs. A request that does not parse is said, after who, on the stderr
// it came with.
func ReadMessages(sock int, who string, msgs chan<- Message) {
	defer close(msgs)
	buf := make([]byte, MaxRequest)
	oob := make([]byte, syscall.CmsgSpace(3*4))
	for {
		n, oobn, _, _, err := syscall.Recvmsg(sock, buf, oob, syscall.MSG_CMSG_CLOEXEC)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return
		}
		files := Rights(oob[:oobn])
		switch {
		case buf[0] == MsgRun && len(files) == 3:
			dir, argv, env, err := ParseRequest(buf[1:n])
			if err == nil {
				msgs <- Message{Dir: dir, Argv: argv, Env: env, Files: files}
				continue
			}
			_, _ = files[2].WriteString(who + ": " + err.Error() + "\n")
		case n == 1 && (buf[0] == MsgTerm || buf[0] == MsgKill):
			msgs <- Message{Stop: buf[0]}
			continue
		}
		for _, f := range files {
			f.Close()
		}
		return // not Purser's wire: the runner ends
	}
}

// WaitFor reaps this process's children — a runner is the reaper of what
// its commands leave — until pid has exited, and returns its status as a
// shell gives it (the exit code, or 128 plus the signal that ended it). It
// fails only when pid is not a child (wait4's error).
func WaitFor(pid int) (int, error) {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if got != pid {
			continue // an orphan reparented to the runner: reaped, nothing more
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ws.ExitStatus(), nil
	}
}
