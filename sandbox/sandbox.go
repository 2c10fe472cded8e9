// Package sandbox runs a program in a box that holds its workspace and
// nothing else of ours: no secrets in its environment, no view of Purser's
// state, the user's HOME or other tasks' workspaces, no signal to Purser's
// processes and no network but one door Purser opens.
//
// On Linux the box is bubblewrap (bwrap): user, mount, pid, network, ipc
// and uts namespaces, made rootless by an unprivileged user as well as by
// root. Its first process is this package's own small init, run from the
// current executable (see IsInit and InitMain), which opens the door relay,
// applies the limits, runs the real command and exits with its status; when
// it exits the kernel kills every process left in the box. Elsewhere
// Available says why there is no box, and Command refuses.
//
// The package knows processes and files only: which box a task gets (its
// workspace, its HOME, the names its backend needs in the environment) is
// the caller's to decide.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/purser-dev/purser/sandbox/internal/boxinit"
)

// Box describes what one boxed program may touch. Paths are absolute host
// paths; inside the box each appears at the same path, so that a program
// (and the files it writes) names the same places inside as Purser does
// outside.
type Box struct {
	// Workspace is the task's working tree, bound read-write and the
	// program's working directory.
	Workspace string
	// Home is the task's own HOME, bound read-write and set as $HOME. It
	// must lie outside Workspace (an agent may not rewrite the files its
	// CLI keeps between runs by editing the repository) and it is kept
	// between runs, so that a resumed agent finds its own state again.
	Home string
	// ReadOnly are further host paths bound read-only, such as the agent
	// CLI's install directory when it is not under /usr.
	ReadOnly []string
	// Env is the whole environment inside the box; nothing else passes
	// (see EnvAllowList). HOME is set from Home whatever Env says; a name
	// for which Forbidden holds is refused.
	Env map[string]string
	// Door, when set, is the box's only way out: 127.0.0.1:Door.Port
	// inside relays to a unix socket on the host.
	Door *Door
	// Allow names host:port destinations (sandbox.network.allow: a
	// package registry) the box may reach besides the door, through
	// Purser's egress proxy: Command starts it (one per allow-list, for the
	// life of the process), binds its unix socket into the box, where the
	// init relays 127.0.0.1:EgressPort to it, and sets HTTP(S)_PROXY,
	// ALL_PROXY (and their lower-case forms) to it, NO_PROXY to 127.0.0.1
	// and localhost so the door stays direct. An entry is host:port or
	// *.suffix:port; anything else is refused by Command, naming it.
	Allow []string
	// Limits bound what the program may consume.
	Limits Limits
	// Init is the host path of the executable that runs as the box's init
	// (it must call IsInit/InitMain first thing in main); empty means the
	// current executable. A small binary that does nothing else starts
	// faster than a large program whose package initialisation runs first.
	Init string
	// Lifeline, when set, is the read end of a pipe whose write end only
	// the caller holds (close-on-exec, as os.Pipe makes it): the box ends,
	// every process in it, when its init reads end of file there — the
	// caller closed its end, or died, at whatever moment, the box's set-up
	// included, which bwrap's --die-with-parent leaves uncovered. Command
	// passes it to bwrap as its fd 3; the caller closes its own copy of
	// this read end once the box has started.
	Lifeline *os.File
	// Serve, when set, makes the box resident: one end of a SOCK_SEQPACKET
	// unix socket pair on which its init runs one command after another on
	// request, with the wire of package boxinit (internal/boxinit/serve.go),
	// instead of a command given to Command. Command passes it to bwrap
	// after Lifeline; the caller closes its own copy once the box has
	// started, and keeps the other end.
	Serve *os.File

	// egressSocket is the host path of the egress proxy's socket, set by
	// Command when Allow is not empty (bwrapArgs stays pure).
	egressSocket string
}

// Door is the single way out of the box's network namespace. The box has
// its own loopback and no route anywhere; Purser listens on a unix socket,
// which is bound into the box, and the box's init relays each TCP
// connection to 127.0.0.1:Port inside to that socket.
type Door struct {
	// Socket is the host path of a unix socket Purser listens on.
	Socket string
	// Port is the TCP port on 127.0.0.1 inside the box that reaches Socket.
	Port int
}

// URL is the door's address as a program in the box reaches it, for the
// base-URL setting of an agent CLI: "http://127.0.0.1:PORT".
func (d Door) URL() string { return "http://127.0.0.1:" + strconv.Itoa(d.Port) }

// Limits bound the boxed program with resource limits (rlimits), which the
// kernel enforces on every process in the box. A zero field takes its
// value from DefaultLimits; a negative one leaves that resource unbounded.
type Limits struct {
	// Processes bounds the processes and threads the box may hold at once
	// (RLIMIT_NPROC). Since Linux 5.14 the count is kept per user
	// namespace, so the box's own processes count, not the user's others.
	// The kernel does not apply it to root outside a user namespace; the
	// box always has one, but when Purser runs as root the box's uid is
	// host root, which the kernel exempts: see docs/sandbox.md.
	Processes int
	// MemoryBytes bounds each process's data segment, heap and private
	// writable mappings included (RLIMIT_DATA). It is per process, not a
	// total for the box: a total needs cgroup v2, not used yet.
	MemoryBytes int64
	// TmpBytes bounds the box's private /tmp, a tmpfs held in memory,
	// which no rlimit counts.
	TmpBytes int64
}

// minProcesses is the least Limits.Processes a box accepts: the init's own
// threads count against the bound, and leave the command a few more.
const minProcesses = 16

// DefaultLimits are the limits a zero Limits field means: generous for a
// coding agent (a Node CLI, a compiler, a test suite in parallel) and small
// enough that a fork bomb or a runaway allocation stops.
var DefaultLimits = Limits{Processes: 1024, MemoryBytes: 16 << 30, TmpBytes: 4 << 30}

// resolved returns l with zero fields taken from DefaultLimits.
func (l Limits) resolved() Limits {
	if l.Processes == 0 {
		l.Processes = DefaultLimits.Processes
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultLimits.MemoryBytes
	}
	if l.TmpBytes == 0 {
		l.TmpBytes = DefaultLimits.TmpBytes
	}
	return l
}

// EgressPort is the TCP port on the box's 127.0.0.1 where its egress proxy
// answers (when Allow is not empty): the port squid made the proxies'
// habit, or the next one when the door holds it.
func (b Box) EgressPort() int {
	if b.Door != nil && b.Door.Port == egressPort {
		return egressPort + 1
	}
	return egressPort
}

// egressPort is EgressPort's usual answer.
const egressPort = 3128

// EgressURL is the proxy URL a program in the box is given: "http://127.0.0.1:PORT".
func (b Box) EgressURL() string { return "http://127.0.0.1:" + strconv.Itoa(b.EgressPort()) }

// proxyEnv are the variables that point a program at the egress proxy (the
// lower-case forms are curl's and most tools'; Go and Node read both).
var proxyEnv = []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"}

// Paths inside the box that belong to the box itself, not to the host.
const (
	boxDir     = "/run/purser-box"
	initPath   = boxDir + "/init"
	doorSocket = boxDir + "/door.sock"
	// egressSocket is where the egress proxy's socket is bound.
	egressSock = boxDir + "/egress.sock"
)

// lifelineFD is the file descriptor of Box.Lifeline in bwrap and the box's
// init: the first after stdin, stdout and stderr (Command's ExtraFiles).
const lifelineFD = 3

// serveFD is the file descriptor of Box.Serve in bwrap and the box's
// init: the next after the lifeline's.
func (b Box) serveFD() int {
	if b.Lifeline != nil {
		return lifelineFD + 1
	}
	return lifelineFD
}

// initArg is the hidden first argument that makes a binary the box's init.
const initArg = boxinit.Arg

// Command returns a command, not started, that runs name with args inside
// the box. name is looked up in the box's PATH (Env["PATH"]), inside the
// box. The command's process is bwrap: killing it (or cancelling ctx) kills
// every process in the box, and so does the death of the process that
// starts it. The box's init (Box.Init, or else the current executable)
// must call IsInit/InitMain first thing in main. A resident box (Serve)
// has no command of its own: name is "".
func (b Box) Command(ctx context.Context, name string, args ...string) (*exec.Cmd, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	var err error
	self := b.Init
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("sandbox: finding the current executable to run as the box's init: %w", err)
		}
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	if len(b.Allow) > 0 {
		e, err := egressFor(b.Allow)
		if err != nil {
			return nil, err
		}
		b.egressSocket = e.socket
	}
	if err := b.checkHost(self); err != nil {
		return nil, err
	}
	argv, err := b.bwrapArgs(hostLayout(), self, name, args)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, probe.bwrap, argv...)
	if b.Lifeline != nil {
		cmd.ExtraFiles = []*os.File{b.Lifeline} // lifelineFD
	}
	if b.Serve != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, b.Serve) // b.serveFD()
	}
	// bwrap itself needs nothing from the environment: it gets the box's,
	// so that no secret sits even in its /proc/PID/environ.
	cmd.Env = b.environ()
	return cmd, nil
}

// environ is the box's environment as a sorted list, HOME set from Home.
func (b Box) environ() []string {
	env := make([]string, 0, len(b.Env)+1)
	for k, v := range b.Env {
		if k != "HOME" {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, "HOME="+b.Home)
	if len(b.Allow) > 0 {
		// The proxy's variables are the box's, whatever Env says.
		env = slices.DeleteFunc(env, func(kv string) bool {
			k, _, _ := strings.Cut(kv, "=")
			return slices.Contains(proxyEnv, k) || strings.EqualFold(k, "NO_PROXY")
		})
		for _, k := range proxyEnv {
			env = append(env, k+"="+b.EgressURL())
		}
		env = append(env, "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
	}
	sort.Strings(env)
	return env
}

// layout is what the host's system directories are, so that bwrapArgs
// stays a pure function of its inputs: for each name, a symlink target
// ("usr/bin" for a merged-/usr /bin) or "" for a directory to bind; absent
// names are left out.
type layout struct {
	system map[string]string // /usr, /bin, /lib*, /sbin
	etc    []string          // the files and directories of /etc the box sees
}

// systemDirs are bound read-only when present: the programs and libraries
// any command needs.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcEntries are the parts of /etc a program needs to run, resolve users,
// load libraries, verify TLS and tell the time. The rest of /etc (host
// keys, other services' configuration, credentials) stays out; so does
// resolv.conf, since the box has no DNS.
var etcEntries = []string{
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/alternatives", "/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/crypto-policies",
	"/etc/localtime", "/etc/timezone", "/etc/mime.types", "/etc/os-release",
	"/etc/gitconfig", "/etc/inputrc", "/etc/terminfo",
}

// hostLayout reads this machine's system directories for bwrapArgs.
func hostLayout() layout {
	l := layout{system: map[string]string{}}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				l.system[d] = target
			}
		case fi.IsDir():
			l.system[d] = ""
		}
	}
	for _, e := range etcEntries {
		if _, err := os.Stat(e); err == nil {
			l.etc = append(l.etc, e)
		}
	}
	return l
}

// bwrapArgs builds bwrap's arguments for running name with args in the
// box, self being the host path of the executable that serves as the box's
// init. Pure: it checks the box's fields but touches nothing.
func (b Box) bwrapArgs(l layout, self, name string, args []string) ([]string, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	if name == "" && b.Serve == nil {
		return nil, errors.New("sandbox: no command to run")
	}
	if name != "" && b.Serve != nil {
		return nil, errors.New("sandbox: a resident box (Serve) runs its commands on request, not one given at its start")
	}
	a := []string{
		// Namespaces: its own users, mounts, pids, network, ipc and host
		// name. --disable-userns stops the program building namespaces of
		// its own inside, from which it could rearrange what it sees.
		"--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--disable-userns",
		"--hostname", "purser-box",
		// The box dies with the process that started it, and has no
		// controlling terminal to push keystrokes into (TIOCSTI).
		"--die-with-parent", "--new-session",
		// Our init is pid 1: it reaps, and its exit ends the namespace.
		"--as-pid-1",
		// No capabilities inside, even when Purser runs as root.
		"--cap-drop", "ALL",
		"--clearenv",
	}
	a = append(a, l.systemMounts()...)
	lim := b.Limits.resolved()
	a = append(a, "--proc", "/proc", "--dev", "/dev")
	if lim.TmpBytes > 0 {
		a = append(a, "--size", strconv.FormatInt(lim.TmpBytes, 10))
	}
	a = append(a, "--tmpfs", "/tmp")
	for _, p := range b.ReadOnly {
		p = filepath.Clean(p)
		a = append(a, "--ro-bind", p, p)
	}
	ws, home := filepath.Clean(b.Workspace), filepath.Clean(b.Home)
	a = append(a, "--bind", ws, ws, "--bind", home, home)
	a = append(a, "--ro-bind", self, initPath)
	if b.Door != nil {
		// Writable: connecting to a unix socket needs write permission on it.
		a = append(a, "--bind", filepath.Clean(b.Door.Socket), doorSocket)
	}
	if len(b.Allow) > 0 {
		if b.egressSocket == "" {
			return nil, errors.New("sandbox: a box with network.allow needs its egress proxy started (Box.Command does)")
		}
		a = append(a, "--bind", b.egressSocket, egressSock)
	}
	// The root itself (a tmpfs holding the mount points) read-only, once
	// every mount is made: nothing is written outside the binds and /tmp.
	a = append(a, "--remount-ro", "/")
	for _, kv := range b.environ() {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	a = append(a, "--chdir", ws, "--", initPath, initArg)
	a = append(a, b.initArgs(lim)...)
	if name == "" {
		return a, nil
	}
	a = append(a, "--", name)
	return append(a, args...), nil
}

// systemMounts are bwrap's arguments for the host's system, read-only:
// its directories, and the symlinks among them as symlinks, then /etc's
// entries a program needs.
func (l layout) systemMounts() []string {
	names := make([]string, 0, len(l.system))
	for d := range l.system {
		names = append(names, d)
	}
	sort.Strings(names)
	var a []string
	for _, d := range names {
		if target := l.system[d]; target != "" {
			a = append(a, "--symlink", target, d)
		} else {
			a = append(a, "--ro-bind", d, d)
		}
	}
	for _, e := range l.etc {
		a = append(a, "--ro-bind", e, e)
	}
	return a
}

// initArgs are the box's init's arguments (sandbox/internal/boxinit's
// Parse): its relays, lifeline and serving socket, and the limits lim.
func (b Box) initArgs(lim Limits) []string {
	var a []string
	if b.Door != nil {
		a = append(a, "door="+strconv.Itoa(b.Door.Port))
	}
	if len(b.Allow) > 0 {
		a = append(a, "egress="+strconv.Itoa(b.EgressPort()))
	}
	if b.Lifeline != nil {
		a = append(a, "lifeline="+strconv.Itoa(lifelineFD))
	}
	if b.Serve != nil {
		a = append(a, "serve="+strconv.Itoa(b.serveFD()))
	}
	return append(a, "nproc="+strconv.Itoa(lim.Processes), "data="+strconv.FormatInt(lim.MemoryBytes, 10))
}

// check refuses a box whose fields would make a box other than the one
// described: relative paths, a HOME inside the workspace, an environment
// bwrap cannot carry, a door without a port, an allow-list entry that is
// not host:port.
func (b Box) check() error {
	if _, err := parseAllowList(b.Allow); err != nil {
		return fmt.Errorf("sandbox: network.allow: %w", err)
	}
	for _, p := range []struct{ what, path string }{{"workspace", b.Workspace}, {"home", b.Home}} {
		if !filepath.IsAbs(p.path) {
			return fmt.Errorf("sandbox: the %s must be an absolute path, not %q", p.what, p.path)
		}
	}
	ws, home := filepath.Clean(b.Workspace), filepath.Clean(b.Home)
	if within(home, ws) || within(ws, home) {
		return fmt.Errorf("sandbox: the box's HOME %s and its workspace %s must not contain one another", home, ws)
	}
	if b.Init != "" && !filepath.IsAbs(b.Init) {
		return fmt.Errorf("sandbox: the box's init must be an absolute path, not %q", b.Init)
	}
	for _, p := range b.ReadOnly {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("sandbox: a read-only path must be absolute, not %q", p)
		}
		if p = filepath.Clean(p); within(ws, p) || within(home, p) {
			return fmt.Errorf("sandbox: the read-only path %s holds the box's workspace or HOME, and would show what lies beside them", p)
		}
	}
	for k, v := range b.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.Contains(v, "\x00") {
			return fmt.Errorf("sandbox: environment variable %q cannot be passed", k)
		}
		if Forbidden(k) {
			return fmt.Errorf("sandbox: environment variable %s never enters a box (Purser's settings, database credentials and webhook URLs stay outside)", k)
		}
	}
	if d := b.Door; d != nil {
		if !filepath.IsAbs(d.Socket) {
			return fmt.Errorf("sandbox: the door's socket must be an absolute path, not %q", d.Socket)
		}
		if d.Port < 1 || d.Port > 65535 {
			return fmt.Errorf("sandbox: the door's port %d is not a TCP port", d.Port)
		}
	}
	if b.Limits.Processes > 0 && b.Limits.Processes < minProcesses {
		return fmt.Errorf("sandbox: a limit of %d processes is below a box's least, %d (its init's own threads count against it)", b.Limits.Processes, minProcesses)
	}
	return nil
}

// within reports whether path is dir or lies below it (both clean).
func within(path, dir string) bool {
	if dir == "/" {
		return true
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// checkHost refuses a box whose host paths are missing, saying which,
// rather than leave bwrap to fail at the start with its own words.
func (b Box) checkHost(init string) error {
	paths := []struct{ what, path string }{{"workspace", b.Workspace}, {"HOME", b.Home}, {"init", init}}
	for _, p := range b.ReadOnly {
		paths = append(paths, struct{ what, path string }{"read-only path", p})
	}
	if b.Door != nil {
		paths = append(paths, struct{ what, path string }{"door's socket", b.Door.Socket})
	}
	if b.egressSocket != "" {
		paths = append(paths, struct{ what, path string }{"egress proxy's socket", b.egressSocket})
	}
	for _, p := range paths {
		if _, err := os.Stat(p.path); err != nil {
			return fmt.Errorf("sandbox: the box's %s: %w", p.what, err)
		}
	}
	return nil
}
