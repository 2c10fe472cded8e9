package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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
