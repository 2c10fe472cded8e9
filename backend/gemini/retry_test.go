package gemini

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// Issue 22, item 11: Gemini CLI skips a system settings file that is not
// root's all the way up, so for a user who is not root (or with Purser's
// cache under /tmp) the file Purser writes leaves its retries on.
func TestSystemSettingsReadOnlyWhenRootsAllTheWayUp(t *testing.T) {
	// In a directory others may write, and for a user who is not root the
	// file is theirs.
	path := filepath.Join(othersMayWrite(t), "settings.json")
	if err := os.WriteFile(path, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := readBySystemSettings(path); !errors.Is(err, errSettingsSkipped) || !strings.Contains(err.Error(), "retries stay on") {
		t.Fatalf("%v: want the file said to be skipped, the retries on", err)
	}
	// A link, root's or not, to such a file is no better.
	link := filepath.Join(t.TempDir(), "link.json")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if err := readBySystemSettings(link); !errors.Is(err, errSettingsSkipped) {
		t.Fatalf("%v: want the link skipped", err)
	}
	// /etc/passwd is root's, in directories only root writes, on any
	// ordinary system: read.
	for _, p := range []string{"/", "/etc", "/etc/passwd"} {
		fi, err := os.Stat(p)
		if err != nil || fi.Sys().(*syscall.Stat_t).Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
			t.Skipf("%s is not root's alone here", p)
		}
	}
	if err := readBySystemSettings("/etc/passwd"); err != nil {
		t.Fatalf("/etc/passwd: %v, want it read", err)
	}
}

// The call says, in its note, that Gemini CLI's own retries stay on when
// the settings Purser gives it would be skipped, and purser check's line
// says the same.
func TestCallSaysWhenGeminiRetriesStayOn(t *testing.T) {
	cache := othersMayWrite(t) // never read by Gemini CLI as system settings
	t.Setenv("XDG_CACHE_HOME", cache)
	dir := t.TempDir()
	script := filepath.Join(dir, "gemini")
	body := `#!/bin/sh
echo '{"type":"init","session_id":"s1","model":"gemini-2.5-pro"}'
echo '{"type":"result","status":"success","stats":{"models":{}}}'
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := New(purser.BackendSpec{Type: "gemini", Options: map[string]any{"command": script, "env": map[string]any{"HOME": dir}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Call(t.Context(), purser.CallRequest{Workspace: dir, Prompt: "p"}, func(budget.UsageEvent) {})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Note, "retries stay on") || !strings.Contains(res.Note, "root") {
		t.Fatalf("note %q: want it to say Gemini CLI's own retries stay on, and why", res.Note)
	}
	if line := b.OwnRetries(); !strings.HasPrefix(line, "Gemini CLI's own on:") || !strings.Contains(line, cache) {
		t.Fatalf("check's line %q: want the retries said to be on, naming the file", line)
	}
}

// othersMayWrite is a fresh directory that others may write to, so that
// Gemini CLI reads no system settings under it, for root too: t.TempDir()
// alone is not, when $TMPDIR is root's alone rather than under /tmp.
func othersMayWrite(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}
