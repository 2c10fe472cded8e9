//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Inside the box: the workspace and the box's HOME are writable, HOME is
// set to it, the system is read-only, /tmp is private and empty, /proc
// shows the box's processes only, /dev is minimal; the user's real HOME,
// Purser's state directory and another task's workspace do not exist.
func TestFilesTheBoxSeesAndDoesNot(t *testing.T) {
	w := newWorld(t)
	marker, err := os.CreateTemp("/tmp", "purser-sandbox-host-marker")
	if err != nil {
		t.Fatal(err)
	}
	marker.Close()
	t.Cleanup(func() { os.Remove(marker.Name()) })
	script := `
probe() { if eval "$2" >/dev/null 2>&1; then echo "$1=yes"; else echo "$1=no"; fi; }
probe ws_write 'echo out > out.txt'
probe ws_read 'cat README'
probe home_write 'echo h > "$HOME/written"'
probe home_read 'cat "$HOME/.agent/state"'
echo "home=$HOME"
echo "pwd=$(pwd)"
probe usr_write 'touch /usr/purser-box-test'
probe etc_write 'touch /etc/passwd'
probe etc_shadow 'test -e /etc/shadow'
probe real_home_key 'cat ` + w.realHome + `/.ssh/id_rsa'
probe real_home_dir 'ls ` + w.realHome + `'
probe netrc 'cat ` + w.realHome + `/.netrc'
probe state_db 'cat ` + w.stateDir + `/purser.db'
probe other_ws 'ls ` + w.otherWS + `'
probe host_work 'ls /work'
probe host_root_home 'ls /root/.bashrc'
probe host_tmp_marker 'test -e ` + marker.Name() + `'
echo "tmp_entries=$(ls -A /tmp | tr '\n' ' ')"
probe tmp_write 'echo t > /tmp/boxed'
probe root_write 'touch /boxed-root'
echo "procs=$(ls /proc | grep -c '^[0-9]')"
probe dev_null 'echo x > /dev/null'
echo "dev_entries=$(ls /dev | tr '\n' ' ')"
probe sys 'ls /sys/class'
`
	r := sh(t, w.box, script)
	got := lines(r.stdout)
	want := map[string]string{
		"ws_write": "yes", "ws_read": "yes", "home_write": "yes", "home_read": "yes",
		"home": w.box.Home, "pwd": w.box.Workspace,
		"usr_write": "no", "etc_write": "no", "etc_shadow": "no",
		"real_home_key": "no", "real_home_dir": "no", "netrc": "no", "state_db": "no", "other_ws": "no",
		"host_work": "no", "host_root_home": "no", "host_tmp_marker": "no",
		"tmp_write": "yes", "root_write": "no", "dev_null": "yes", "sys": "no",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q in the box, want %q", k, got[k], v)
		}
	}
	// The shell, its $(…) subshell and ls, and the init: a handful, not the host's.
	if n, err := strconv.Atoi(got["procs"]); err != nil || n > 6 {
		t.Errorf("the box's /proc lists %q processes; want only its own few", got["procs"])
	}
	// /tmp is empty but for the way to what the box binds there (in tests,
	// the workspace and the test binary may live under /tmp).
	for _, e := range strings.Fields(got["tmp_entries"]) {
		p := "/tmp/" + e
		if !within(w.box.Workspace, p) && !within(w.box.Home, p) && !within(w.exe, p) {
			t.Errorf("the box's /tmp holds %s", e)
		}
	}
	for _, d := range strings.Fields(got["dev_entries"]) {
		switch d {
		case "console", "core", "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty", "urandom", "zero":
		default:
			t.Errorf("the box's /dev holds %s, which a minimal /dev does not", d)
		}
	}
	if b, err := os.ReadFile(filepath.Join(w.box.Workspace, "out.txt")); err != nil || string(b) != "out\n" {
		t.Errorf("the box's write to its workspace is not on the host: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(w.box.Home, "written")); err != nil || string(b) != "h\n" {
		t.Errorf("the box's write to its HOME is not on the host: %q, %v", b, err)
	}
	if _, err := os.Stat("/tmp/boxed"); err == nil {
		t.Errorf("the box's /tmp is the host's: /tmp/boxed appeared")
		os.Remove("/tmp/boxed")
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
}

// Secrets set in Purser's environment do not reach the box; the allow-list
// and the box's HOME do.
func TestEnvironmentIsTheAllowListOnly(t *testing.T) {
	for k, v := range map[string]string{
		"PGPASSWORD": "pw", "PURSER_DB": "postgres://u:pw@h/db", "PURSER_SERVE_TOKEN": "tok",
		"SLACK_WEBHOOK_URL": "https://hooks.example/x", "GITHUB_TOKEN": "ghs_x", "AWS_SECRET_ACCESS_KEY": "k",
		"LANG": "C.UTF-8", "HOME": "/root-of-the-host",
	} {
		t.Setenv(k, v)
	}
	w := newWorld(t)
	r := run(t, w.box, "env")
	env := lines(r.stdout)
	for _, k := range []string{"PGPASSWORD", "PURSER_DB", "PURSER_SERVE_TOKEN", "SLACK_WEBHOOK_URL", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY"} {
		if v, ok := env[k]; ok {
			t.Errorf("%s=%s is set in the box", k, v)
		}
	}
	if env["LANG"] != "C.UTF-8" || env["HOME"] != w.box.Home || env["PATH"] != w.box.Env["PATH"] {
		t.Errorf("the box's LANG, HOME, PATH = %q, %q, %q; want C.UTF-8, %s, %s", env["LANG"], env["HOME"], env["PATH"], w.box.Home, w.box.Env["PATH"])
	}
	if t.Failed() {
		t.Logf("env in the box:\n%s%s", r.stdout, r.stderr)
	}
}

// The box has its own pid namespace: the test process (standing for
// Purser) is not there to be seen or stopped.
func TestBoxCannotSeeOrSignalItsSupervisor(t *testing.T) {
	w := newWorld(t)
	pid := strconv.Itoa(os.Getpid())
	r := sh(t, w.box, "kill -STOP "+pid+" && echo stopped; test -e /proc/"+pid+" && echo visible; exit 0")
	if strings.Contains(r.stdout, "stopped") || strings.Contains(r.stdout, "visible") {
		t.Errorf("the box reached the host's pid %s: %q", pid, r.stdout)
	}
	if st := procState(os.Getpid()); st == "T" {
		_ = syscall.Kill(os.Getpid(), syscall.SIGCONT)
		t.Fatal("the test process was stopped from inside the box")
	}
}

// Killing the box's process (what a HARD stop does) kills every process in
// it, a shell's background children included.
func TestKillingTheBoxKillsEveryProcessInIt(t *testing.T) {
	w := newWorld(t)
	marker := uniqueSleep()
	cmd, err := w.box.Command(context.Background(), "sh", "-c", "sleep "+marker+" & sleep "+marker+" & wait")
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both sleeps to start", func() bool { return len(processesWith(marker)) == 2 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitFor(t, "the box's sleeps to be gone", func() bool { return len(processesWith(marker)) == 0 })
}

// The box dies with the process that started it, even one killed with
// SIGKILL that could clean nothing up.
func TestBoxDiesWithItsParent(t *testing.T) {
	w := newWorld(t)
	marker := uniqueSleep()
	parent := exec.Command(w.exe, w.box.Workspace, w.box.Home, marker)
	parent.Env = append(os.Environ(), helperEnv+"=parent")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = parent.Process.Kill(); _ = parent.Wait() }()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "started\n" {
		t.Fatalf("the parent said %q", line)
	}
	waitFor(t, "both sleeps to start", func() bool { return len(processesWith(marker)) == 2 })
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	waitFor(t, "the box's sleeps to be gone after its parent was killed", func() bool { return len(processesWith(marker)) == 0 })
}

// The box has its own network: a server on the host's loopback is out of
// reach, and so is DNS; the door reaches the host's unix socket.
func TestNetworkIsTheDoorOnly(t *testing.T) {
	w := newWorld(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if r := w.inBox(t, w.box, "dial", ln.Addr().String()); r.code == 0 || !strings.Contains(r.stdout, "refused") {
		t.Errorf("the box reached the host's %s: %q %q", ln.Addr(), r.stdout, r.stderr)
	}
	if r := w.inBox(t, w.box, "resolve", "example.com"); r.code == 0 {
		t.Errorf("the box resolved a name: %q", r.stdout)
	}

	sockDir, err := os.MkdirTemp("", "door")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "s")
	uln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(rw, "door says hello to %s", r.URL.Path)
	})}
	go func() { _ = srv.Serve(uln) }()
	defer srv.Close()
	b := w.box
	b.Door = &Door{Socket: sock, Port: 18080}
	r := w.inBox(t, b, "get", "http://127.0.0.1:18080/v1/messages")
	if r.stdout != "door says hello to /v1/messages" {
		t.Errorf("through the door: %q, %q (exit %d)", r.stdout, r.stderr, r.code)
	}
	// The door is the only way out: the host's loopback is still not reachable.
	if r := w.inBox(t, b, "dial", ln.Addr().String()); r.code == 0 {
		t.Errorf("with a door, the box reached the host's %s: %q", ln.Addr(), r.stdout)
	}
}

// The box reports its command's exit: a status, a signal as 128+n, a
// command not found as 127.
func TestExitStatusIsTheCommands(t *testing.T) {
	w := newWorld(t)
	for script, want := range map[string]int{"exit 0": 0, "exit 7": 7, "kill -TERM $$": 128 + int(syscall.SIGTERM)} {
		if r := sh(t, w.box, script); r.code != want {
			t.Errorf("%q exits %d from the box, want %d (%s)", script, r.code, want, r.stderr)
		}
	}
	if r := run(t, w.box, "no-such-command-here"); r.code != 127 {
		t.Errorf("a missing command exits %d, want 127 (%s)", r.code, r.stderr)
	}
}

// uniqueSleep is a sleep duration no other process on the host uses, to
// find the box's sleeps by.
func uniqueSleep() string { return strconv.Itoa(900000 + rand.IntN(99999)) }

// processesWith lists the host's processes whose command line is "sleep
// marker".
func processesWith(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && string(b) == "sleep\x00"+marker+"\x00" && procState(pid) != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procState is the state letter of pid, "" when it is gone.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+3 > len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// waitFor polls cond for up to ten seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// A graceful stop reaches the command through the box's init: the
// command's trap runs and its status is the box's. A signal to bwrap
// itself would end the box with the command unwarned.
func TestSignalReachesTheCommand(t *testing.T) {
	w := newWorld(t)
	cmd, err := w.box.Command(context.Background(), "sh", "-c", `trap 'echo stopping; exit 3' TERM; echo ready; while :; do sleep 0.05; done`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	if line, _ := r.ReadString('\n'); line != "ready\n" {
		t.Fatalf("the box said %q", line)
	}
	if err := Signal(cmd, syscall.SIGTERM); err != nil {
		_ = cmd.Process.Kill()
		t.Fatal(err)
	}
	rest, _ := r.ReadString('\n')
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 3 || rest != "stopping\n" {
		t.Errorf("after SIGTERM through the init: exit %d (%v), said %q; want 3 and the trap's line", code, err, rest)
	}
}

// A box whose workspace is missing is refused before bwrap starts, by name.
func TestCommandRefusesMissingPaths(t *testing.T) {
	w := newWorld(t)
	b := w.box
	b.Workspace += "-gone"
	if _, err := b.Command(context.Background(), "true"); err == nil || !strings.Contains(err.Error(), "workspace") {
		t.Errorf("a missing workspace: %v", err)
	}
	b = w.box
	b.Door = &Door{Socket: filepath.Join(w.box.Home, "no.sock"), Port: 1}
	if _, err := b.Command(context.Background(), "true"); err == nil || !strings.Contains(err.Error(), "door's socket") {
		t.Errorf("a missing door socket: %v", err)
	}
}

// The door relays both ways in full and passes a half-close on: 4 MiB sent
// from the box come back whole from an echo server on the host's socket,
// which answers until the box's side is closed, on several connections at
// once. With the socket gone, the box is told the door is closed.
func TestDoorRelaysBothWaysAndHalfCloses(t *testing.T) {
	w := newWorld(t)
	sockDir, err := os.MkdirTemp("", "door")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c) // until the box closes its side
			}()
		}
	}()
	b := w.box
	b.Door = &Door{Socket: sock, Port: 18081}
	b.Env = copyEnv(b.Env)
	b.Env[helperEnv] = "echo"
	url := strings.TrimPrefix(b.Door.URL(), "http://")
	r := run(t, b, "sh", "-c", w.exe+" "+url+" 4194304 & "+w.exe+" "+url+" 65536 & wait")
	if strings.Count(r.stdout, "echoed=true err=<nil>") != 2 {
		t.Errorf("through the door and back: %q %q", r.stdout, r.stderr)
	}
	// The socket stays, nobody listens: the box finds the door closed, and says so.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	r = run(t, b, w.exe, url, "16")
	if !strings.Contains(r.stderr, "the door is closed") {
		t.Errorf("with no server on the door: %q %q", r.stdout, r.stderr)
	}
}
