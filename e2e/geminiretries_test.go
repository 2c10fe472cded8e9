package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 22, item 11: Gemini CLI reads the settings that switch its own
// retries off only from a file root owns in directories only root can
// write. With Purser's cache under the temp directory (as for any user
// who is not root, whose cache is their own) it skips them, and purser check
// says its retries stay on, and why, rather than nothing.
func TestCheckSaysGeminiRetriesStayOn(t *testing.T) {
	dir := clis(t)
	if _, err := os.Stat(filepath.Join(dir, "gemini")); err != nil {
		t.Skip("gemini not installed:", err)
	}
	base := t.TempDir()
	task := "id: g\ngoal: \"Say done\"\nworkspace: ./ws\nbackend:\n  type: gemini\n  command: " + filepath.Join(dir, "gemini") +
		"\n  models: {standard: gemini-2.5-pro}\nvalidators:\n  - name: ok\n    run: \"true\"\nbudget:\n  hard: {usd: 1.0, maxIterations: 3}\n"
	if err := os.MkdirAll(filepath.Join(base, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "t.yaml"), []byte(task), 0o644); err != nil {
		t.Fatal(err)
	}
	unboxedProject(t, base)
	cmd := exec.Command(buildPurser(t), "check", "t.yaml")
	cmd.Dir = base
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(base, "cache"), "PURSER_DB="+filepath.Join(base, "purser.db"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("purser check: %v\n%s", err, out)
	}
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "retries ") {
			line = l
		}
	}
	if !strings.Contains(line, "Gemini CLI's own on") || !strings.Contains(line, "only from a file root owns") ||
		(!strings.Contains(line, "writable by group or others") && !strings.Contains(line, "owned by uid")) {
		t.Fatalf("check's retries line %q: want it to say Gemini CLI's own retries stay on, and why\n%s", line, out)
	}
}
