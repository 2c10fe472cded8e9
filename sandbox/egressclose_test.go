package sandbox

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run leaves no directory of egress sockets behind: CloseEgress closes
// the proxies and removes it, and a later allow-list gets a new one.
func TestCloseEgressLeavesNoSocketsBehind(t *testing.T) {
	// A short TMPDIR of its own: t.TempDir() under a long $TMPDIR would
	// pass a unix socket's 107-byte limit.
	tmp, err := os.MkdirTemp("/tmp", "pe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	t.Setenv("TMPDIR", tmp)
	e, err := egressFor([]string{"example.com:443"})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(e.socket)
	if _, err := os.Stat(e.socket); err != nil {
		t.Fatalf("the proxy's socket: %v", err)
	}
	CloseEgress()
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after CloseEgress the sockets' directory %s: %v, want it gone", dir, err)
	}
	again, err := egressFor([]string{"example.com:443"})
	if err != nil {
		t.Fatal(err)
	}
	defer CloseEgress()
	if again == e {
		t.Fatal("a closed proxy was handed out again")
	}
	if _, err := os.Stat(again.socket); err != nil {
		t.Fatalf("a new proxy after CloseEgress: %v", err)
	}
}

// Under a $TMPDIR too long for a socket's path, the sockets' directory is
// made under /tmp instead, and a socket binds there.
func TestSocketDirFitsASocketUnderALongTMPDIR(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 90))
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", long)
	dir, err := SocketDir("purser-door-", len("door.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if strings.HasPrefix(dir, long) {
		t.Fatalf("sockets' directory %s under the long TMPDIR", dir)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "door.sock"))
	if err != nil {
		t.Fatalf("binding a socket in %s: %v", dir, err)
	}
	ln.Close()
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("sockets' directory mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
}
