//go:build linux

package boxinit

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A serving box's command line has no command; a run request reads back
// as the client wrote it.
func TestParseServeAndRequest(t *testing.T) {
	c, err := Parse([]string{"lifeline=3", "serve=4", "nproc=64", "data=-1"})
	if err != nil || c.Serve != 4 || c.Lifeline != 3 || len(c.Argv) != 0 {
		t.Fatalf("Parse = %+v, %v", c, err)
	}
	if _, err := Parse([]string{"serve=2"}); err == nil {
		t.Error("serve=2 accepted")
	}
	dir, argv, env, err := ParseRequest([]byte("/ws\x002\x00sh\x00-c\x00A=1\x00B=2\x00"))
	if err != nil || dir != "/ws" || !slices.Equal(argv, []string{"sh", "-c"}) || !slices.Equal(env, []string{"A=1", "B=2"}) {
		t.Fatalf("ParseRequest = %q %q %q %v", dir, argv, env, err)
	}
	for _, bad := range []string{"", "/ws\x00", "/ws\x000\x00sh\x00", "/ws\x003\x00sh\x00", "/ws\x001\x00sh"} {
		if _, _, _, err := ParseRequest([]byte(bad)); err == nil {
			t.Errorf("ParseRequest(%q) accepted", bad)
		}
	}
}

// emptyDir empties a directory, nested ones and symbolic links included,
// keeps it, and follows no link out of it.
func TestEmptyDirKeepsTheDirAndFollowsNoLink(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "kept"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "b", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := emptyDir(dir); err != nil {
		t.Fatal(err)
	}
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("left in the emptied directory: %v", names)
	}
	if _, err := os.Stat(filepath.Join(outside, "kept")); err != nil {
		t.Errorf("a file a link pointed at was removed: %v", err)
	}
}
