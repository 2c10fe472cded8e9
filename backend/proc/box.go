package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/sandbox"
)

// The agent CLIs in the box (issue 20): the workspace read-write, a HOME of
// the task's own outside it (kept for resume: the CLI's sessions are read
// from there), the CLI's install read-only, a private /tmp, the allow-listed
// environment, and one way out: the door, relayed to the call's wire meter.
// The CLI is pointed at the meter's URL (127.0.0.1:PORT), which inside the
// box is the door: a repository's settings that point it elsewhere reach
// nothing, since the box has no other route.

var _ backend.Boxable = (*CLIOptions)(nil)

// Boxed reports whether the CLI runs in a box.
func (o CLIOptions) Boxed() bool { return o.Sandbox().On() }

// HomeFor is the HOME the CLI runs with for task id: in a box, the task's
// own (…/boxes/agent-ID under Purser's state directory for the project);
// otherwise Home. The backends read the CLI's session files under it.
func (o CLIOptions) HomeFor(id string) string {
	if o.Sandbox().On() && o.Sandbox().Homes != "" && id != "" {
		return filepath.Join(o.Sandbox().Homes, "agent-"+id)
	}
	return o.Home()
}

// boxCall is one call's box: the box and the door's relay, closed when the
// call ends.
type boxCall struct {
	box  sandbox.Box
	door *doorRelay
	// env are the sandbox: setting's names, let in beside the allow-list.
	env []string
	// exe is the CLI's executable, its links resolved: what the box runs
	// (a link on the host PATH, such as npm's, may point where the box
	// sees only the target).
	exe string
}

// close stops the door's relay and removes its socket.
func (b *boxCall) close() {
	if b != nil && b.door != nil {
		b.door.close()
	}
}

// boxFor describes the box of one call: nil when the CLI runs unboxed.
// wire is the call's meter (nil: no door, no network).
func (o CLIOptions) boxFor(req purser.CallRequest, wire *WireMeter, seed map[string]string) (*boxCall, error) {
	if !o.Sandbox().On() {
		return nil, nil
	}
	if o.Sandbox().Homes == "" || req.TaskID == "" {
		return nil, errors.New("sandbox is on but no HOME can be made for the box (a backend built without the config loader, or a call without a task)")
	}
	home := o.HomeFor(req.TaskID)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("making the box's HOME: %w", err)
	}
	if err := seedHome(home, seed); err != nil {
		return nil, err
	}
	exe, ro, err := installPaths(o.Command, req.Workspace)
	if err != nil {
		return nil, err
	}
	b := &boxCall{box: sandbox.Box{Workspace: req.Workspace, Home: home, ReadOnly: append(slices.Clone(o.Sandbox().ReadOnly), ro...),
		Limits: o.Sandbox().Limits(), Allow: o.Sandbox().Allow}, env: o.Sandbox().Env, exe: exe}
	if wire != nil {
		port, err := urlPort(wire.URL())
		if err != nil {
			return nil, err
		}
		if b.door, err = openDoor(net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
			return nil, err
		}
		b.box.Door = &sandbox.Door{Socket: b.door.socket, Port: port}
	}
	return b, nil
}

// command rewrites c, the CLI's command as its backend made it, to run in
// the box: bwrap's path and arguments, the box's environment (the
// allow-list, the backend's settings and needs, the options' env: and the
// setting's names; HOME the box's).
func (b *boxCall) command(ctx context.Context, c *Command, needs []string) error {
	names := slices.Clone(b.env)
	host := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			host[k] = v
		}
	}
	// What the backend set beyond Purser's own environment is the CLI's
	// settings (and the options' env:): passed; the rest only by name.
	for _, kv := range c.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if hv, inHost := host[k]; !inHost || hv != v {
			names = append(names, k)
		}
	}
	names = append(names, needs...)
	env := sandbox.EnvAllowList(c.Env, names...)
	delete(env, "HOME")
	// The box's /tmp is its own: a TMPDIR of the host's is not there.
	env["TMPDIR"] = "/tmp"

	box := b.box
	box.Env = env
	box.ReadOnly = append(slices.Clone(box.ReadOnly), c.Files...)
	cmd, err := box.Command(ctx, b.exe, c.Args...)
	if err != nil {
		return err
	}
	c.Path, c.Args, c.Env, c.Box = cmd.Path, cmd.Args[1:], cmd.Env, true
	return nil
}

// maxSeed bounds a settings file copied into a box's HOME.
const maxSeed = 1 << 20

// seedHome copies the settings files of seed into home (see CLICall.Seed):
// regular files only, at most maxSeed bytes, written readable by the user.
func seedHome(home string, seed map[string]string) error {
	for rel, from := range seed {
		if from == "" || filepath.IsAbs(rel) || strings.HasPrefix(filepath.Clean(rel), "..") {
			continue
		}
		fi, err := os.Stat(from)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxSeed {
			continue
		}
		data, err := os.ReadFile(from)
		if err != nil {
			return fmt.Errorf("copying the CLI's settings %s into the box's HOME: %w", from, err)
		}
		to := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			return fmt.Errorf("copying the CLI's settings into the box's HOME: %w", err)
		}
		// A link the agent left there is replaced, not followed.
		_ = os.Remove(to)
		if err := os.WriteFile(to, data, 0o600); err != nil {
			return fmt.Errorf("copying the CLI's settings into the box's HOME: %w", err)
		}
	}
	return nil
}

// urlPort is the port of the meter's URL.
func urlPort(raw string) (int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return 0, fmt.Errorf("the wire meter's URL %q: %w", raw, err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil || port < 1 {
		return 0, fmt.Errorf("the wire meter's URL %q has no port", raw)
	}
	return port, nil
}

// systemDirs are the directories every box sees read-only already.
var systemDirs = []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/"}

func underSystem(path string) bool {
	for _, d := range systemDirs {
		if strings.HasPrefix(path, d) {
			return true
		}
	}
	return false
}

// installPaths are the host paths the box must see read-only to run the CLI
// command names: nothing when it lies under the system directories or the
// workspace; for a CLI installed by npm (a path inside a node_modules
// directory, as found or as its link resolves), that node_modules directory
// whole, since the CLI loads its packages from it; otherwise the executable
// file itself (its directory may hold anything). An interpreter named on a
// #! line outside the system directories is added the same way.
func installPaths(command, workspace string) (exe string, ro []string, err error) {
	path, err := FindCommand(command)
	if err != nil {
		return "", nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, err
	}
	var out []string
	add := func(p string) {
		p = filepath.Clean(p)
		if underSystem(p) || within(p, workspace) || slices.Contains(out, p) {
			return
		}
		out = append(out, p)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		real = abs
	}
	if nm := nodeModules(real); nm != "" {
		add(nm)
	} else {
		add(real)
	}
	if interp := interpreter(real); interp != "" {
		if ip, err := exec.LookPath(interp); err == nil {
			if r, err := filepath.EvalSymlinks(ip); err == nil {
				add(r)
			}
		}
	}
	return real, out, nil
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	dir = filepath.Clean(dir)
	return dir != "" && dir != "." && (path == dir || strings.HasPrefix(path, dir+"/"))
}

// nodeModules is the outermost node_modules directory p lies in ("" when
// none).
func nodeModules(p string) string {
	i := strings.Index(p, "/node_modules/")
	if i < 0 {
		return ""
	}
	return p[:i+len("/node_modules")]
}

// interpreter is the program a script's #! line names (env's argument for
// "#!/usr/bin/env node"), "" for a binary.
func interpreter(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	line, _, _ := strings.Cut(string(head[:n]), "\n")
	if !strings.HasPrefix(line, "#!") {
		return ""
	}
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 {
		return ""
	}
	if filepath.Base(fields[0]) == "env" {
		for _, f := range fields[1:] {
			if !strings.HasPrefix(f, "-") {
				return f
			}
		}
		return ""
	}
	return fields[0]
}

// doorRelay is the host side of a box's door: a unix socket in a private
// directory outside every workspace, each connection relayed to target
// (the call's wire meter on 127.0.0.1).
type doorRelay struct {
	socket string
	dir    string
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

// openDoor listens on a new unix socket and relays to target.
func openDoor(target string) (*doorRelay, error) {
	dir, err := sandbox.SocketDir("purser-door-", len("door.sock"))
	if err != nil {
		return nil, fmt.Errorf("the box's door: %w", err)
	}
	sock := filepath.Join(dir, "door.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the box's door: %w", err)
	}
	d := &doorRelay{socket: sock, dir: dir, ln: ln, conns: map[net.Conn]bool{}}
	d.wg.Add(1)
	go d.serve(target)
	return d, nil
}

func (d *doorRelay) serve(target string) {
	defer d.wg.Done()
	for {
		in, err := d.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		if !d.track(in, out) {
			return
		}
		d.wg.Add(2)
		go d.pipe(out, in)
		go d.pipe(in, out)
	}
}

// track records a relayed pair, so that close ends them; false once closed.
func (d *doorRelay) track(cs ...net.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		d.conns[c] = true
	}
	return true
}

// pipe copies one way, then half-closes the writer (the peer sees EOF).
func (d *doorRelay) pipe(dst, src net.Conn) {
	defer d.wg.Done()
	_, _ = io.Copy(dst, src)
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := dst.(closeWriter); ok {
		_ = cw.CloseWrite()
	} else {
		dst.Close()
	}
}

// close ends the relay and its connections and removes the socket.
func (d *doorRelay) close() {
	d.mu.Lock()
	d.closed = true
	for c := range d.conns {
		c.Close()
	}
	d.mu.Unlock()
	d.ln.Close()
	d.wg.Wait()
	os.RemoveAll(d.dir)
}

// EnvNames are the names the options' env: sets (HOME aside: a box's is
// its own), for purser check to list among what enters the box.
func (o CLIOptions) EnvNames() []string {
	var names []string
	for k := range o.Env {
		if k != "HOME" {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}

// BoxNetwork says what network the CLI has in a box, for purser check.
func (o CLIOptions) BoxNetwork() string {
	if o.WireMeter != nil && !*o.WireMeter {
		return "none (wireMeter: false): in the box the CLI reaches no provider; the door is the wire meter"
	}
	return "only Purser's door, 127.0.0.1:PORT inside relayed to the call's wire meter, which forwards to the provider; no DNS, no other route (a base URL set elsewhere, e.g. a repository's .claude/settings.json, reaches nothing)"
}
