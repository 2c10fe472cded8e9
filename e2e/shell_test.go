package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/sandbox"
)

// Issue 21, interactive: `purser shell` with a real agent no one here
// wrote, OpenCode, run through it non-interactively (`opencode run`) on
// purser.yaml's type: agent backend against the shared mock: the session
// is DONE with the ledger exact (its own title request and the answer,
// as for `purser run`: docs/agents.md), every request reached the mock
// with the real key Purser holds, in the box as well as out of it; under a
// token cap its answer's request is refused at the door and the session
// ends BLOCKED.
func TestShellOpenCode(t *testing.T) {
	bin := agentsDir(t, "opencode")
	t.Parallel()
	for _, sc := range []struct {
		name     string
		caps     []string
		wantExit int
		state    string
		tokens   int64
		usd      string
		boxed    bool
	}{
		{name: "done", caps: []string{"--usd", "1"}, wantExit: 0, state: "DONE", tokens: 5613, usd: "0.006890"},
		{name: "boxed", caps: []string{"--usd", "1"}, wantExit: 0, state: "DONE", tokens: 5613, usd: "0.006890", boxed: true},
		{name: "cap", caps: []string{"--tokens", "3000"}, wantExit: 3, state: "BLOCKED", tokens: 53, usd: "0.000065"},
	} {
		t.Run(sc.name, func(t *testing.T) {
			purser := buildPurser(t)
			url := backendtest.StartMock(t)
			dir := t.TempDir()
			ws, home := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
			for _, d := range []string{ws, home} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			backend := opencodeBackend(t, bin, home, url)
			if sc.boxed {
				backend = boxedBackend(t, backend, bin, home)
			}
			backend = strings.ReplaceAll(backend, "\n", "\n  ")
			if err := os.WriteFile(filepath.Join(ws, "purser.yaml"), []byte("sandbox: off # the default this test was written under; boxed says on on its backend\nbackends:\n  oc:\n  "+backend+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			db := filepath.Join(dir, "purser.db")
			args := append(append([]string{"shell", "--backend", "oc"}, sc.caps...),
				"--", filepath.Join(bin, "opencode"), "run", "-m", "anthropic/claude-sonnet-4-5", goalPlain)
			cmd := exec.CommandContext(ctx, purser, args...)
			cmd.Dir = ws
			cmd.Env = append(os.Environ(), "PURSER_DB="+db, "PURSER_E2E_REAL_KEY="+realKey)
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != sc.wantExit {
				t.Fatalf("exit %d, want %d\n%s", code, sc.wantExit, out)
			}
			if boxed := strings.Contains(string(out), "through Purser's door (hard $1.00), in its box;"); boxed != sc.boxed {
				t.Errorf("the session in its box: %v, want %v\n%s", boxed, sc.boxed, out)
			}
			if strings.Contains(string(out), realKey) {
				t.Error("the real key was printed")
			}
			st, err := exec.Command(purser, "status", "--json", "--db", db).Output()
			if err != nil {
				t.Fatal(err)
			}
			var status struct{ Tasks []taskStatus }
			if err := json.Unmarshal(st, &status); err != nil || len(status.Tasks) != 1 {
				t.Fatalf("status: %v %s", err, st)
			}
			got := status.Tasks[0]
			if got.Status != sc.state || got.Budget.UsedTokens != sc.tokens || fmt.Sprintf("%.6f", got.Budget.UsedUSD) != sc.usd {
				t.Errorf("session %+v; want %s with %d tokens, $%s\n%s", got, sc.state, sc.tokens, sc.usd, out)
			}
			for _, r := range mockLog[mockRequest](t, url) {
				if strings.HasPrefix(r.Path, "/_mock") || r.Summary.Model == "" {
					continue
				}
				if k := r.Headers["x-api-key"]; !strings.Contains(k, fmt.Sprintf("len=%d>", len(realKey))) {
					t.Errorf("request %s to the mock carried %q, not the real key Purser holds", r.Path, k)
				}
			}
			for _, f := range []string{"STATUS.md", "BUDGET.md"} {
				if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
					t.Errorf("%s not written: %v", f, err)
				}
			}
		})
	}
}

// boxedBackend is an agent's backend mapping in the box: its own HOME (the
// box makes one), the agents' install and home read-only. It skips the
// test where no box can be made, unless PURSER_TEST_SANDBOX=required.
func boxedBackend(t *testing.T, backend, bin, home string) string {
	t.Helper()
	if err := sandbox.Available(); err != nil {
		if os.Getenv("PURSER_TEST_SANDBOX") == "required" {
			t.Fatal("PURSER_TEST_SANDBOX=required but no box can be made here:", err)
		}
		t.Skip("no box can be made here:", err)
	}
	var kept []string
	for _, l := range strings.Split(backend, "\n") {
		if !strings.HasPrefix(l, "    HOME: ") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n") + fmt.Sprintf("\n  sandbox: {mode: on, readOnly: [%s, %s]}", filepath.Dir(bin), home)
}
