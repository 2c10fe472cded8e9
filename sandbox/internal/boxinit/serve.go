//go:build linux

package boxinit

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/purser-dev/purser/internal/reswire"
)

// A resident box (Config.Serve) runs one command after another on request,
// so that a task's validators pay bwrap and this init once, not per run
// (issue 24). The wire is internal/reswire's, shared with the resident
// supervisor of unboxed validators. Between two commands the init kills and
// reaps every process the last one left (kill(-1): it is pid 1 of the box)
// and empties the box's /tmp; it replies " discard" when the box was ended
// for running too many processes, or could not be cleaned.

// Message bytes of the wire (reswire's).
const (
	MsgReady     = reswire.MsgReady
	MsgStarted   = reswire.MsgStarted
	MsgStale     = reswire.MsgStale
	MsgRun       = reswire.MsgRun
	MsgTerm      = reswire.MsgTerm
	MsgKill      = reswire.MsgKill
	ReplyDiscard = reswire.ReplyDiscard
)

// MaxRequest is the largest request the init reads (reswire.MaxRequest).
const MaxRequest = reswire.MaxRequest

// ParseRequest reads a run request's payload (without its 'R').
func ParseRequest(p []byte) (dir string, argv, env []string, err error) {
	return reswire.ParseRequest(p)
}

// serve runs the box as a resident runner on c.Serve until Purser closes
// the socket or the lifeline.
func serve(c Config) int {
	// Not dumpable: the box's processes run as the init's uid, and could
	// otherwise ptrace it or open its descriptors under /proc/1 — take over
	// what it kills between runs and what it replies. Its commands are
	// dumpable again from their exec on.
	if err := setNotDumpable(); err != nil {
		fmt.Fprintf(os.Stderr, "purser box: %v\n", err)
		return ExitBoxFailed
	}
	// A signal from a command in the box (kill -TERM 1) would end a Go
	// program that asked for none: it is taken, and dropped. Only Purser,
	// through the socket, stops a command.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	sock := c.Serve
	syscall.CloseOnExec(sock)
	if c.Lifeline > 0 {
		syscall.CloseOnExec(c.Lifeline)
		go func() {
			lifeline := os.NewFile(uintptr(c.Lifeline), "lifeline")
			var b [1]byte
			_, _ = lifeline.Read(b[:]) // nothing is ever written: it returns at EOF
			_ = syscall.Kill(-1, syscall.SIGKILL)
			os.Exit(128 + int(syscall.SIGKILL))
		}()
	}
	after, err := setLimits(c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "purser box: %v\n", err)
		return ExitBoxFailed
	}
	tooMany := make(chan int, 1)
	if c.NProc > 0 && os.Getuid() == 0 {
		go watchResident(c.NProc, tooMany)
	}
	devNames = namesIn("/dev") // bwrap's: a run adding one leaves state behind
	msgs := make(chan message, 4)
	go reswire.ReadMessages(sock, "purser box", msgs)
	if err := syscall.Sendto(sock, []byte(MsgReady), 0, nil); err != nil {
		return ExitBoxFailed
	}
	for m := range msgs {
		if m.Files == nil {
			continue // a stop that came after its command ended
		}
		if removed(m.Dir) {
			_ = syscall.Sendto(sock, []byte(MsgStale), 0, nil)
			break
		}
		status, discard := runOne(c, after, sock, m, msgs, tooMany)
		reply := strconv.Itoa(status)
		if discard {
			reply += ReplyDiscard
		}
		if err := syscall.Sendto(sock, []byte(reply), 0, nil); err != nil || discard {
			break
		}
	}
	_ = syscall.Kill(-1, syscall.SIGKILL)
	return 0
}

// removed reports whether dir is gone or was removed from its parent (a
// bind mount of a removed directory still shows it, with no links).
func removed(dir string) bool {
	var st syscall.Stat_t
	return syscall.Stat(dir, &st) != nil || st.Nlink == 0
}

// message is what reswire.ReadMessages reads: a run request, or a stop byte.
type message = reswire.Message

// runOne runs req to its end, then kills and reaps whatever it left and
// empties /tmp. It returns the command's status, and whether the box is
// to be discarded.
func runOne(c Config, after []syscall.Rlimit, sock int, req message, msgs <-chan message, tooMany <-chan int) (status int, discard bool) {
	stderr := req.Files[2]
	defer func() {
		for _, f := range req.Files {
			f.Close()
		}
	}()
	status, discard = waitOne(c, after, sock, req, msgs, tooMany)
	if !killRest() {
		fmt.Fprintf(stderr, "purser box: processes left by the command could not be ended\n")
		discard = true
	}
	// What a run leaves outside its processes goes too, or the box goes:
	// the next validator starts in a box as fresh as its own used to be.
	// Said on the box's own stderr, not in the validator's output.
	for _, dir := range []string{"/tmp", "/dev/shm"} {
		if err := emptyDir(dir); err != nil && !os.IsNotExist(err) {
			fmt.Fprintf(os.Stderr, "purser box: emptying %s: %v\n", dir, err)
			discard = true
		}
	}
	if left := leftOutside(devNames); left != "" {
		fmt.Fprintf(os.Stderr, "purser box: the run left %s: the box is not used again\n", left)
		discard = true
	}
	return status, discard
}

// waitOne starts req and waits for it, passing on stops; a box ended for
// too many processes says so on the command's stderr.
func waitOne(c Config, after []syscall.Rlimit, sock int, req message, msgs <-chan message, tooMany <-chan int) (int, bool) {
	stderr := req.Files[2]
	select {
	case <-tooMany: // counted as the last command's processes were ended
	default:
	}
	path, err := lookPathIn(req.Argv[0], reswire.EnvPath(req.Env))
	if err != nil {
		fmt.Fprintf(stderr, "purser box: %v\n", err)
		return ExitNotFound, false
	}
	// Said before the start, not after: a box that ends in between must
	// not have its command taken for one never run, and run again.
	_ = syscall.Sendto(sock, []byte(MsgStarted), 0, nil)
	pid, err := spawn(path, req.Argv, req.Env, req.Dir, req.Files, after)
	if err != nil {
		fmt.Fprintf(stderr, "purser box: starting %s: %v\n", req.Argv[0], err)
		return ExitBoxFailed, false
	}
	done := make(chan int, 1)
	go func() {
		status, err := reswire.WaitFor(pid)
		if err != nil {
			status = ExitBoxFailed
		}
		done <- status
	}()
	for {
		select {
		case status := <-done:
			return status, false
		case n := <-tooMany:
			_ = syscall.Kill(-1, syscall.SIGKILL)
			<-done
			fmt.Fprintf(stderr, "purser box: %d processes, more than the box's limit of %d: the box is ended\n", n, c.NProc)
			return ExitTooManyProcesses, true
		case m, ok := <-msgs:
			switch {
			case !ok: // Purser is gone: serve's kill ends the rest
				_ = syscall.Kill(-1, syscall.SIGKILL)
				return 128 + int(syscall.SIGKILL), true
			case m.Stop == MsgTerm:
				_ = syscall.Kill(-pid, syscall.SIGTERM)
			case m.Stop == MsgKill:
				_ = syscall.Kill(-1, syscall.SIGKILL)
			case m.Files != nil: // one at a time: refused
				fmt.Fprintf(m.Files[2], "purser box: busy\n")
				for _, f := range m.Files {
					f.Close()
				}
			}
		}
	}
}

// killRest kills every process in the box but this init — as pid 1 of the
// box's pid namespace, kill(-1) reaches exactly those — and reaps them,
// until /proc shows none (a process forking while the kill went round is
// caught by the next one). It reports whether none is left.
func killRest() bool {
	for try := 0; try < 50; try++ {
		if countProcesses() <= 1 {
			return true
		}
		_ = syscall.Kill(-1, syscall.SIGKILL)
		for {
			_, err := syscall.Wait4(-1, nil, 0, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				break // ECHILD: every child reaped
			}
		}
		if try > 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return countProcesses() <= 1
}

// emptyDir removes everything in dir that lies on dir's own file system,
// keeping dir. It never enters another file system: the workspace, HOME or
// a read-only path may be bound under the box's /tmp (a workspace made in
// the host's /tmp is), and the directories bwrap made to hold those mount
// points stay, as they are not empty.
func emptyDir(dir string) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return err
	}
	return removeOn(dir, uint64(st.Dev), true)
}

// removeOn removes path and what is below it, what lies on the file system
// dev only; path itself too unless keep. An entry left because a mount
// point is below it is not an error.
func removeOn(path string, dev uint64, keep bool) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return nil // gone meanwhile
	}
	if uint64(st.Dev) != dev {
		return nil // a mount point: another file system
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		// A command may leave a directory it cannot read or write (chmod
		// 0, a read-only cache): everything here is the box's uid's, so
		// the init may make it its own again.
		if st.Mode&0o700 != 0o700 {
			_ = syscall.Chmod(path, 0o700)
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := removeOn(path+"/"+n, dev, false); err != nil {
				return err
			}
		}
	}
	if keep {
		return nil
	}
	err := syscall.Unlink(path)
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		err = syscall.Rmdir(path)
	}
	if err == syscall.ENOTEMPTY || err == syscall.EBUSY || err == syscall.ENOENT {
		return nil // holds a mount point (or went meanwhile)
	}
	return err
}

// watchResident is watchProcesses for a resident box: past max processes
// it tells the runner (which ends the command's processes and reports it)
// instead of ending the box from here.
func watchResident(max int, tooMany chan<- int) {
	for {
		time.Sleep(processPoll)
		if n := countProcesses(); n > max {
			select {
			case tooMany <- n:
			default:
			}
		}
	}
}

// setNotDumpable makes this process not dumpable (prctl PR_SET_DUMPABLE):
// a process without CAP_SYS_PTRACE, every one in the box, can then neither
// trace it nor open its /proc files.
func setNotDumpable() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		return fmt.Errorf("making the init not dumpable: %w", errno)
	}
	return nil
}

// devNames are the names in the box's /dev once bwrap had made it.
var devNames map[string]bool

// namesIn is the set of names in dir.
func namesIn(dir string) map[string]bool {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

// leftOutside says what a run left that outlives its processes outside the
// box's /tmp and /dev/shm (which are emptied), or "": a name bwrap did not
// make in /dev (a writable tmpfs), or a System V IPC object (the box's IPC
// namespace lives as long as the box, and its memory is in no limit).
// Rare enough that the box is discarded rather than cleaned.
func leftOutside(dev map[string]bool) string {
	for n := range namesIn("/dev") {
		if dev != nil && !dev[n] {
			return "/dev/" + n
		}
	}
	for _, kind := range []string{"shm", "msg", "sem"} {
		b, err := os.ReadFile("/proc/sysvipc/" + kind)
		if err != nil {
			continue
		}
		if hasSecondLine(b) { // the first is the header
			return "a System V IPC object (" + kind + ")"
		}
	}
	return ""
}

// hasSecondLine reports whether b has a line after its first.
func hasSecondLine(b []byte) bool {
	for i, c := range b {
		if c == '\n' {
			return i+1 < len(b)
		}
	}
	return false
}
