package workspace_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser/workspace"
)

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Issue 15 #3: a planted link at an artifact's name is refused and reported,
// and the file it leads to keeps its content.
func TestWriteArtifactRefusesPlantedLinks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(target, at string) error
		want  error
	}{
		{"symlink to a file outside", os.Symlink, workspace.ErrLinkedTarget},
		{"hard link to a file outside", os.Link, workspace.ErrLinkedTarget},
		{"dangling symlink", func(target, at string) error { return os.Symlink(target+".new", at) }, workspace.ErrLinkedTarget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, outside := t.TempDir(), t.TempDir()
			keys := filepath.Join(outside, "authorized_keys")
			if err := os.WriteFile(keys, []byte("the user's key\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := tc.plant(keys, filepath.Join(ws, "STATUS.md")); err != nil {
				t.Fatal(err)
			}
			err := workspace.WriteArtifact(ws, "STATUS.md", []byte("# status\n"))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "STATUS.md") {
				t.Fatalf("WriteArtifact = %v, want %v naming STATUS.md", err, tc.want)
			}
			if got := readString(t, keys); got != "the user's key\n" {
				t.Fatalf("the file outside was overwritten: %q", got)
			}
			if _, err := os.Stat(keys + ".new"); err == nil {
				t.Fatal("a file was created outside through a dangling symlink")
			}
		})
	}
}

func TestWriteArtifactWritesAndReplaces(t *testing.T) {
	ws := t.TempDir()
	for _, body := range []string{"first\n", "second\n"} {
		if err := workspace.WriteArtifact(ws, "BUDGET.md", []byte(body)); err != nil {
			t.Fatal(err)
		}
		if got := readString(t, filepath.Join(ws, "BUDGET.md")); got != body {
			t.Fatalf("BUDGET.md = %q, want %q", got, body)
		}
	}
	fi, err := os.Stat(filepath.Join(ws, "BUDGET.md"))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("BUDGET.md mode %v, %v; want 0644", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(ws)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	for _, bad := range []string{"../STATUS.md", "sub/STATUS.md", "/tmp/STATUS.md", ""} {
		if err := workspace.WriteArtifact(ws, bad, []byte("x")); err == nil {
			t.Errorf("WriteArtifact(%q) accepted a name that is not a plain file at the root", bad)
		}
	}
	if err := os.Mkdir(filepath.Join(ws, "STATUS.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := workspace.WriteArtifact(ws, "STATUS.md", []byte("x")); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a directory at STATUS.md: %v", err)
	}
}

// Issue 15 #4: replacing a file hard-linked to one outside the workspace
// gives the workspace a new file and leaves the one outside alone; the
// replaced file keeps its mode.
func TestReplaceFileDoesNotWriteThroughHardLinks(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "bashrc")
	if err := os.WriteFile(secret, []byte("the user's shell setup\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	inside := filepath.Join(ws, "run.sh")
	if err := os.Link(secret, inside); err != nil {
		t.Fatal(err)
	}
	if err := workspace.ReplaceFile(inside, []byte("echo pwned\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, secret); got != "the user's shell setup\n" {
		t.Fatalf("the file outside was written through its hard link: %q", got)
	}
	if got := readString(t, inside); got != "echo pwned\n" {
		t.Fatalf("the workspace file = %q", got)
	}
	if fi, _ := os.Stat(inside); fi.Mode().Perm() != 0o755 {
		t.Fatalf("replaced file mode %v, want its old 0755 kept", fi.Mode().Perm())
	}
	if err := workspace.ReplaceFile(filepath.Join(ws, "new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(ws, "new.txt")); fi.Mode().Perm() != 0o644 {
		t.Fatalf("new file mode %v, want 0644", fi.Mode().Perm())
	}
}
