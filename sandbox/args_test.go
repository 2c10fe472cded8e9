//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// hasSeq reports whether seq appears, in order and adjacent, in args.
func hasSeq(args []string, seq ...string) bool {
	for i := 0; i+len(seq) <= len(args); i++ {
		if slices.Equal(args[i:i+len(seq)], seq) {
			return true
		}
	}
	return false
}

var testLayout = layout{
	system: map[string]string{"/usr": "", "/bin": "usr/bin", "/lib": "usr/lib"},
	etc:    []string{"/etc/passwd", "/etc/ssl"},
}

func testBox() Box {
	return Box{
		Workspace: "/work/tasks/t1/ws",
		Home:      "/var/lib/purser/homes/t1",
		ReadOnly:  []string{"/opt/claude/"},
		Env:       map[string]string{"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/root"},
		Door:      &Door{Socket: "/run/purser/door.sock", Port: 8787},
		Limits:    Limits{Processes: 64},
	}
}

// The argv bwrap gets: every namespace, the lifetime and terminal guards,
// the system read-only, the workspace and HOME read-write at their own
// paths, the door, only the box's environment, and the init running the
// command with the limits.
func TestBwrapArgs(t *testing.T) {
	args, err := testBox().bwrapArgs(testLayout, "/usr/local/bin/purser", "claude", []string{"-p", "fix it"})
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range [][]string{
		{"--unshare-user"}, {"--unshare-pid"}, {"--unshare-net"}, {"--unshare-ipc"}, {"--unshare-uts"}, {"--disable-userns"},
		{"--die-with-parent"}, {"--new-session"}, {"--as-pid-1"}, {"--cap-drop", "ALL"}, {"--clearenv"},
		{"--ro-bind", "/usr", "/usr"}, {"--symlink", "usr/bin", "/bin"}, {"--symlink", "usr/lib", "/lib"},
		{"--ro-bind", "/etc/passwd", "/etc/passwd"}, {"--ro-bind", "/etc/ssl", "/etc/ssl"},
		{"--proc", "/proc"}, {"--dev", "/dev"}, {"--size", "4294967296", "--tmpfs", "/tmp"},
		{"--ro-bind", "/opt/claude", "/opt/claude"},
		{"--bind", "/work/tasks/t1/ws", "/work/tasks/t1/ws"},
		{"--bind", "/var/lib/purser/homes/t1", "/var/lib/purser/homes/t1"},
		{"--ro-bind", "/usr/local/bin/purser", initPath},
		{"--bind", "/run/purser/door.sock", doorSocket},
		{"--setenv", "HOME", "/var/lib/purser/homes/t1"}, {"--setenv", "LANG", "C.UTF-8"}, {"--setenv", "PATH", "/usr/bin:/bin"},
		{"--chdir", "/work/tasks/t1/ws"},
		{"--", initPath, initArg, "door=8787", "nproc=64", "data=" + "17179869184", "--", "claude", "-p", "fix it"},
	} {
		if !hasSeq(args, seq...) {
			t.Errorf("bwrap args lack %q:\n%s", seq, strings.Join(args, " "))
		}
	}
	if n := strings.Count(strings.Join(args, " "), "--setenv"); n != 3 {
		t.Errorf("%d --setenv, want 3 (PATH, LANG, HOME):\n%s", n, strings.Join(args, " "))
	}
	if hasSeq(args, "--setenv", "HOME", "/root") {
		t.Error("Env's HOME overrode the box's")
	}
	// The /tmp tmpfs comes before the binds, which may lie under /tmp.
	if slices.Index(args, "--tmpfs") > slices.Index(args, "/work/tasks/t1/ws") {
		t.Error("the private /tmp is mounted after the workspace and would hide one under /tmp")
	}
	// The root is made read-only after the last mount.
	if i := slices.Index(args, "--remount-ro"); i < 0 || args[i+1] != "/" || i < slices.Index(args, doorSocket) {
		t.Errorf("the root is not remounted read-only after the mounts:\n%s", strings.Join(args, " "))
	}
	// Nothing of the host beyond what is named: no bind of / or of /etc whole.
	if hasSeq(args, "--ro-bind", "/", "/") || hasSeq(args, "--ro-bind", "/etc", "/etc") || hasSeq(args, "--bind", "/", "/") {
		t.Errorf("the host's / or /etc is bound whole:\n%s", strings.Join(args, " "))
	}
}

// A negative limit is passed on as none; no door, no door argument.
func TestBwrapArgsWithoutDoorOrLimits(t *testing.T) {
	b := testBox()
	b.Door = nil
	b.Limits = Limits{Processes: -1, MemoryBytes: -1, TmpBytes: -1}
	args, err := b.bwrapArgs(testLayout, "/p", "true", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !hasSeq(args, initArg, "nproc=-1", "data=-1", "--", "true") || slices.Contains(args, doorSocket) || slices.Contains(args, "--size") {
		t.Errorf("args: %s", strings.Join(args, " "))
	}
	c, err := parseInitArgs([]string{"nproc=-1", "data=-1", "--", "true"})
	if err != nil || c.nproc != -1 || c.data != -1 || c.door != 0 || !slices.Equal(c.argv, []string{"true"}) {
		t.Errorf("parseInitArgs: %+v, %v", c, err)
	}
	for _, bad := range [][]string{{"door=1"}, {"door=x", "--", "a"}, {"bogus=1", "--", "a"}, {"--"}} {
		if _, err := parseInitArgs(bad); err == nil {
			t.Errorf("parseInitArgs(%q) accepted", bad)
		}
	}
}

// A box described wrongly is refused before anything starts, by name.
func TestBoxRefusesWhatItCannotKeep(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*Box)
		want string
	}{
		"relative workspace": {func(b *Box) { b.Workspace = "ws" }, "absolute"},
		"relative home":      {func(b *Box) { b.Home = "home" }, "absolute"},
		"home in workspace":  {func(b *Box) { b.Home = b.Workspace + "/.home" }, "must not contain"},
		"workspace in home":  {func(b *Box) { b.Workspace = b.Home + "/ws" }, "must not contain"},
		"relative ro":        {func(b *Box) { b.ReadOnly = []string{"node_modules"} }, "absolute"},
		"ro above workspace": {func(b *Box) { b.ReadOnly = []string{"/work/tasks/"} }, "would show what lies beside"},
		"ro root":            {func(b *Box) { b.ReadOnly = []string{"/"} }, "would show what lies beside"},
		"serve token":        {func(b *Box) { b.Env = map[string]string{"PURSER_SERVE_TOKEN": "x"} }, "PURSER_SERVE_TOKEN never enters"},
		"pg password":        {func(b *Box) { b.Env = map[string]string{"PGPASSWORD": "x"} }, "PGPASSWORD never enters"},
		"bad env name":       {func(b *Box) { b.Env = map[string]string{"A=B": "x"} }, "cannot be passed"},
		"door port":          {func(b *Box) { b.Door.Port = 0 }, "not a TCP port"},
		"door socket":        {func(b *Box) { b.Door.Socket = "door.sock" }, "absolute"},
		"few processes":      {func(b *Box) { b.Limits.Processes = 15 }, "below a box's least, 16"},
		"allow without port": {func(b *Box) { b.Allow = []string{"registry.npmjs.org:443", "registry.npmjs.org"} }, `"registry.npmjs.org" is not host:port`},
		"allow url":          {func(b *Box) { b.Allow = []string{"https://registry.npmjs.org:443"} }, "https://registry.npmjs.org:443"},
	} {
		b := testBox()
		tc.edit(&b)
		_, err := b.bwrapArgs(testLayout, "/p", "true", nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
	b := testBox()
	b.Allow = []string{"x.example:1"}
	if _, err := b.bwrapArgs(testLayout, "/p", "true", nil); err == nil || !strings.Contains(err.Error(), "egress proxy") {
		t.Errorf("Allow without the proxy started: %v", err)
	}
	if _, err := testBox().bwrapArgs(testLayout, "/p", "", nil); err == nil {
		t.Error("an empty command was accepted")
	}
}

// A bwrap that cannot make a box (user namespaces disabled) gets an
// answer naming the sysctls to check.
func TestAvailableSaysWhyBwrapFailed(t *testing.T) {
	dir := t.TempDir()
	fake := "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "bwrap"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	_, err := available()
	for _, want := range []string{"No permissions to create new namespace", "user.max_user_namespaces=", "sandbox: off"} {
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), want) {
			t.Errorf("available() with a failing bwrap: %v; want it to say %q", err, want)
		}
	}
}

// Without bwrap the answer says what to install, and wraps ErrUnavailable.
func TestAvailableSaysWhatToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := available()
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "apt-get install bubblewrap") || !strings.Contains(err.Error(), "sandbox: off") {
		t.Errorf("available() without bwrap: %v", err)
	}
}

// A box with an allow-list gets the egress proxy's socket, the init's
// relay to it, and the proxy variables (whatever Env said), NO_PROXY
// keeping the door direct; the door's port is left to the door.
func TestBwrapArgsEgress(t *testing.T) {
	b := testBox()
	b.Door.Port = egressPort
	b.Allow = []string{"registry.npmjs.org:443"}
	b.Env["HTTPS_PROXY"] = "http://evil.example:1"
	b.egressSocket = "/tmp/purser-egress-1/0.sock"
	args, err := b.bwrapArgs(testLayout, "/p", "true", nil)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://127.0.0.1:3129"
	for _, seq := range [][]string{
		{"--bind", "/tmp/purser-egress-1/0.sock", egressSock},
		{initArg, "door=3128", "egress=3129"},
		{"--setenv", "HTTPS_PROXY", url}, {"--setenv", "http_proxy", url}, {"--setenv", "ALL_PROXY", url},
		{"--setenv", "NO_PROXY", "127.0.0.1,localhost"}, {"--setenv", "no_proxy", "127.0.0.1,localhost"},
	} {
		if !hasSeq(args, seq...) {
			t.Errorf("bwrap args lack %q:\n%s", seq, strings.Join(args, " "))
		}
	}
	if hasSeq(args, "--setenv", "HTTPS_PROXY", "http://evil.example:1") {
		t.Error("Env's HTTPS_PROXY overrode the egress proxy")
	}
	c, err := parseInitArgs([]string{"door=3128", "egress=3129", "nproc=1", "data=1", "--", "true"})
	if err != nil || c.egress != 3129 {
		t.Errorf("parseInitArgs: %+v, %v", c, err)
	}
}
