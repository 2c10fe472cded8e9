//go:build linux

package boxinit

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseReadsWhatSandboxWrites(t *testing.T) {
	c, err := Parse([]string{"door=8787", "egress=3129", "lifeline=3", "nproc=64", "data=-1", "--", "sh", "-c", "x=1"})
	if err != nil || c.Door != 8787 || c.Egress != 3129 || c.Lifeline != 3 || c.NProc != 64 || c.Data != -1 || !slices.Equal(c.Argv, []string{"sh", "-c", "x=1"}) {
		t.Fatalf("Parse = %+v, %v", c, err)
	}
	for _, bad := range [][]string{{"door=1"}, {"door=x", "--", "a"}, {"bogus=1", "--", "a"}, {"--"}, {"nproc", "--", "a"}, {"lifeline=2", "--", "a"}} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// lookPath finds a command as os/exec's LookPath does: the first
// executable in $PATH, skipping what is not executable or not a file, a
// path with a slash as it is, and never one found through a relative
// entry of $PATH.
func TestLookPathIsLookPaths(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"a/tool": 0o644, "b/tool": 0o755, "c/tool": 0o755, "rel/only": 0o755} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "d", "tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, tc := range []struct{ path, name, want, err string }{
		{filepath.Join(dir, "d") + ":" + filepath.Join(dir, "a") + ":" + filepath.Join(dir, "b") + ":" + filepath.Join(dir, "c"), "tool", filepath.Join(dir, "b", "tool"), ""},
		{filepath.Join(dir, "a"), "tool", "", "not found"},
		{"rel:" + filepath.Join(dir, "c"), "only", "", "relative"},
		{":" + filepath.Join(dir, "c"), "tool", filepath.Join(dir, "c", "tool"), ""},
		{"", "./rel/only", "./rel/only", ""},
		{"", "./a/tool", "", "permission"},
	} {
		t.Setenv("PATH", tc.path)
		got, err := lookPath(tc.name)
		if tc.err == "" && (err != nil || got != tc.want) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("PATH=%q lookPath(%q) = %q, %v; want %q, error with %q", tc.path, tc.name, got, err, tc.want, tc.err)
		}
	}
}
