package backendtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// StartMock runs the shared fake LLM server (fixtures/agent-cli/mock) on a
// free port of 127.0.0.1 for the test, and returns its base URL. It skips
// the test when the server or python3 is not there.
func StartMock(t testing.TB) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(here), "..", "..", "..", "shared", "fixtures", "agent-cli", "mock", "mock_llm.py")
	if _, err := os.Stat(script); err != nil {
		t.Skip("the fake LLM server is not beside the repository:", err)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is needed for the fake LLM server")
	}
	cmd := exec.Command("python3", script, "--port", "0", "--log", filepath.Join(t.TempDir(), "mock.jsonl"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "LISTENING ") {
		t.Fatalf("the fake LLM server did not start: %q %v", line, err)
	}
	return "http://127.0.0.1:" + strings.TrimSpace(strings.TrimPrefix(line, "LISTENING "))
}
