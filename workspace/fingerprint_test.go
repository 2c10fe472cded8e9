package workspace_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser/workspace"
)

// fingerprintAsSpecified is Fingerprint as its doc says it, written the
// plain way (each entry's line formatted by fmt): the fast one must sum up
// the very same lines.
func fingerprintAsSpecified(t *testing.T, ws string) string {
	h := sha256.New()
	err := filepath.WalkDir(ws, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ws, path)
		switch {
		case d.IsDir() && (d.Name() == ".git" || d.Name() == ".purser"):
			return filepath.SkipDir
		case !d.IsDir() && filepath.Dir(rel) == "." && workspace.IsArtifactName(rel):
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00%d\n", rel, info.Size(), info.Mode(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestFingerprintSumsEachEntrysPathSizeModeAndTime(t *testing.T) {
	ws := t.TempDir()
	for name, body := range map[string]string{
		"main.go": "package main\n", "src/a/b.go": "package a\n", "STATUS.md": "Purser's\n", "docs/STATUS.md": "the user's\n",
		".git/HEAD": "ref\n", ".purser/x": "y", "script.sh": "#!/bin/sh\n", "é dir/ünï code.txt": "x",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(ws, "script.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("main.go", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	got := workspace.Fingerprint(ws)
	if want := fingerprintAsSpecified(t, ws); got != want {
		t.Fatalf("Fingerprint = %s, want %s", got, want)
	}
	// Named unclean, the workspace's entries are still named from it.
	if slash := workspace.Fingerprint(ws + "/"); slash != fingerprintAsSpecified(t, ws+"/") || slash != got {
		t.Errorf("Fingerprint(%q) = %s, want %s", ws+"/", slash, got)
	}
	for _, name := range []string{ws + "//", ws + "/./", ws + "/src/..", filepath.Dir(ws) + "/../" + filepath.Base(filepath.Dir(ws)) + "/" + filepath.Base(ws)} {
		if again := workspace.Fingerprint(name); again != got {
			t.Errorf("Fingerprint(%q) = %s, want %s", name, again, got)
		}
	}
	// Named through a symlink, the workspace is summed up where it leads.
	link := filepath.Join(t.TempDir(), "ws-link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	if viaLink := workspace.Fingerprint(link); viaLink != got {
		t.Errorf("Fingerprint through a symlink = %s, want %s", viaLink, got)
	}
	// Purser's own files are not the agent's changes; the user's are.
	if err := os.WriteFile(filepath.Join(ws, "STATUS.md"), []byte("rewritten by Purser\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if again := workspace.Fingerprint(ws); again != got {
		t.Error("rewriting the root STATUS.md changed the fingerprint")
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(ws, "docs/STATUS.md"), later, later); err != nil {
		t.Fatal(err)
	}
	if again := workspace.Fingerprint(ws); again == got || again != fingerprintAsSpecified(t, ws) {
		t.Errorf("touching docs/STATUS.md: fingerprint %s (before %s)", again, got)
	}
	if viaLink := workspace.Fingerprint(link); viaLink == got {
		t.Error("a change in a workspace named through a symlink did not change its fingerprint")
	}
	if strings.Trim(got, "0123456789abcdef") != "" || len(got) != 64 {
		t.Errorf("Fingerprint = %q, want a SHA-256 in hex", got)
	}
}

// BenchmarkFingerprint sums up a workspace of 800 files in 40 directories,
// as the engine does each iteration.
func BenchmarkFingerprint(b *testing.B) {
	ws := b.TempDir()
	for i := range 800 {
		p := filepath.Join(ws, fmt.Sprintf("pkg%02d/file%03d.go", i%40, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("package p\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		workspace.Fingerprint(ws)
	}
}
