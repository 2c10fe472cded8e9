package sandbox

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"

	"github.com/purser-dev/purser/sandbox/internal/boxinit"
)

// IsInit reports whether this process was started as a box's init. A
// program that runs boxes calls it first thing in main (a test binary in
// TestMain) and, when it holds, calls InitMain and nothing else.
func IsInit() bool { return len(os.Args) > 1 && os.Args[1] == initArg }

// InitMain runs this process as the box's init and exits with the status
// of the command it runs (boxinit.Run): it opens the door relay and the
// egress relay the box needs, then runs the init. A box that needs no
// relay never gets here: boxinit's own init ran it, before the rest of the
// program was initialised.
func InitMain() { os.Exit(initMain(os.Args[2:])) }

// initConfig is what Command tells the init on its command line.
type initConfig struct {
	door   int // TCP port on the box's 127.0.0.1 relayed to doorSocket; 0: none
	egress int // TCP port on the box's 127.0.0.1 relayed to the egress proxy; 0: none
	nproc  int
	data   int64
	argv   []string // the command and its arguments
}

// parseInitArgs reads `door=PORT egress=PORT nproc=N data=BYTES -- NAME ARGS…` as
// bwrapArgs writes it. A negative limit means none.
func parseInitArgs(args []string) (initConfig, error) {
	c, err := boxinit.Parse(args)
	return initConfig{door: c.Door, egress: c.Egress, nproc: c.NProc, data: c.Data, argv: c.Argv}, err
}

// The init's own exit statuses, as a shell gives them: the box could not
// run its command, or the command was not found.
const (
	exitBoxFailed = boxinit.ExitBoxFailed
	exitNotFound  = boxinit.ExitNotFound
)

// exitTooManyProcesses is the box's status when it was ended for running
// more processes than its limit.
const exitTooManyProcesses = boxinit.ExitTooManyProcesses

// initMain is InitMain, returning the status to exit with.
func initMain(args []string) int {
	c, err := boxinit.Parse(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "purser box: %v\n", err)
		return exitBoxFailed
	}
	for _, r := range []struct {
		port       int
		path, what string
	}{{c.Door, doorSocket, "the door"}, {c.Egress, egressSock, "the egress proxy"}} {
		if r.port <= 0 {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)))
		if err != nil {
			fmt.Fprintf(os.Stderr, "purser box: opening %s: %v\n", r.what, err)
			return exitBoxFailed
		}
		go serveRelay(ln, r.path, r.what)
	}
	return boxinit.Run(c)
}

// serveRelay relays each connection to ln to the unix socket at path (the
// door's, or the egress proxy's: what), both ways, until either side
// closes.
func serveRelay(ln net.Listener, path, what string) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("unix", path)
			if err != nil {
				// Said once per connection, on the boxed program's stderr,
				// which Purser keeps: a closed door is Purser's fault to find.
				fmt.Fprintf(os.Stderr, "purser box: %s is closed: %v\n", what, err)
				return
			}
			defer out.Close()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(out, in)
				_ = out.(*net.UnixConn).CloseWrite()
				close(done)
			}()
			_, _ = io.Copy(in, out)
			_ = in.(*net.TCPConn).CloseWrite()
			<-done
		}()
	}
}
