//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helperEnv names the variable that runs the test binary as one of the
// helpers below instead of the tests: inside a box (to dial, fetch, resolve,
// allocate) or outside it (a parent that starts a box and is then killed).
const helperEnv = "SANDBOX_TEST_HELPER"

// requiredEnv, when set, makes a test that needs a box fail instead of
// skip where none can be made: CI sets it, so that the box's tests cannot
// quietly stop running.
const requiredEnv = "PURSER_TEST_SANDBOX"

func TestMain(m *testing.M) {
	if IsInit() {
		InitMain()
	}
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(helper(h, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// helper runs one helper and returns its exit status; what it found goes
// to stdout.
func helper(name string, args []string) int {
	switch name {
	case "dial":
		c, err := net.DialTimeout("tcp", args[0], 2*time.Second)
		if err != nil {
			fmt.Println("refused:", err)
			return 1
		}
		c.Close()
		fmt.Println("connected")
	case "get":
		resp, err := http.Get(args[0])
		if err != nil {
			fmt.Println("failed:", err)
			return 1
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		fmt.Print(b.String())
	case "proxyget", "connect":
		return egressHelper(name, args)
	case "resolve":
		addrs, err := net.LookupHost(args[0])
		if err != nil {
			fmt.Println("failed:", err)
			return 1
		}
		fmt.Println("resolved:", addrs)
	case "echo":
		// Sends args[1] bytes to args[0], closes its side, and says whether
		// what came back is what it sent.
		n, _ := strconv.Atoi(args[1])
		c, err := net.DialTimeout("tcp", args[0], 2*time.Second)
		if err != nil {
			fmt.Println("refused:", err)
			return 1
		}
		sent := bytes.Repeat([]byte("0123456789abcdef"), n/16)
		go func() {
			_, _ = c.Write(sent)
			_ = c.(*net.TCPConn).CloseWrite()
		}()
		var got bytes.Buffer
		_, err = got.ReadFrom(c)
		fmt.Printf("echoed=%v err=%v\n", bytes.Equal(got.Bytes(), sent), err)
	case "parent":
		// args: workspace home marker. Starts a box, says so, waits to be killed.
		b := Box{Workspace: args[0], Home: args[1], Env: EnvAllowList(os.Environ())}
		cmd, err := b.Command(context.Background(), "sh", "-c", "sleep "+args[2]+" & sleep "+args[2]+" & wait")
		if err != nil {
			fmt.Println("failed:", err)
			return 1
		}
		if err := cmd.Start(); err != nil {
			fmt.Println("failed:", err)
			return 1
		}
		fmt.Println("started")
		_ = cmd.Wait()
	default:
		fmt.Fprintln(os.Stderr, "unknown helper", name)
		return 2
	}
	return 0
}

// world is a box with the host around it that it must not see: a real
// HOME with an SSH key, Purser's state directory with its database, a
// sibling task's workspace.
type world struct {
	box                         Box
	realHome, stateDir, otherWS string
	exe                         string
}

// newWorld makes a box for the test binary (bound read-only, so the box can
// run its helpers) and the host files it must not see. It skips the test,
// saying why, when no box can be made here.
func newWorld(t testing.TB) world {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv(requiredEnv) != "" {
			t.Fatalf("%s is set, and %v", requiredEnv, err)
		}
		t.Skip(err)
	}
	root := t.TempDir()
	w := world{
		realHome: filepath.Join(root, "realhome"),
		stateDir: filepath.Join(root, "state"),
		otherWS:  filepath.Join(root, "other-task"),
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w.exe = exe
	for name, body := range map[string]string{
		filepath.Join(w.realHome, ".ssh", "id_rsa"):    "PRIVATE KEY",
		filepath.Join(w.realHome, ".netrc"):            "machine x password y",
		filepath.Join(w.stateDir, "purser.db"):         "ledger",
		filepath.Join(w.otherWS, "purser.yaml"):        "database: x",
		filepath.Join(root, "ws", "README"):            "the task's own",
		filepath.Join(root, "home", ".agent", "state"): "kept for resume",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := EnvAllowList(os.Environ(), helperEnv)
	env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	w.box = Box{
		Workspace: filepath.Join(root, "ws"),
		Home:      filepath.Join(root, "home"),
		ReadOnly:  []string{exe},
		Env:       env,
	}
	return w
}

// result is what a boxed command did.
type result struct {
	stdout, stderr string
	code           int
}

// run runs name in the box and waits (at most a minute) for it.
func run(t *testing.T, b Box, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, err := b.Command(ctx, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running %s in the box: %v", name, err)
	}
	return r
}

// sh runs a shell script in the box.
func sh(t *testing.T, b Box, script string) result {
	t.Helper()
	return run(t, b, "sh", "-c", script)
}

// inBox runs one of the test binary's helpers in the box.
func (w world) inBox(t *testing.T, b Box, helper string, args ...string) result {
	t.Helper()
	b.Env = copyEnv(b.Env)
	b.Env[helperEnv] = helper
	return run(t, b, w.exe, args...)
}

func copyEnv(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// lines splits a script's output into key=value pairs, one a line.
func lines(s string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		k, v, _ := strings.Cut(l, "=")
		m[k] = v
	}
	return m
}
