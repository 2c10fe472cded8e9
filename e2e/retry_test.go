package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser/backend/backendtest"
)

// Retries are Purser's: each CLI's own retries are switched off where the
// CLI allows it, those left are counted in BUDGET.md, every backend tells a
// fault the same way, and a provider that never answers is given up on
// after the stall window. Each test drives `purser run` with the real CLIs.

// retryBackend is one backend under test, set up against a provider URL.
type retryBackend struct {
	name string
	// setup returns the backend's YAML mapping and the environment purser
	// needs for it, with the provider at url.
	setup func(t *testing.T, url string) (backend string, env []string)
}

// retryBackends are the three agent CLIs, and the openai backend when
// withOpenAI: the backends that talk to a provider themselves.
func retryBackends(t *testing.T, withOpenAI bool) []retryBackend {
	dir := clis(t)
	bs := []retryBackend{
		{"claude", func(t *testing.T, url string) (string, []string) { return claudeAgainstMock(t, dir, t.TempDir(), url) }},
		{"codex", func(t *testing.T, url string) (string, []string) { return codexAgainstMock(t, dir, t.TempDir(), url) }},
	}
	if _, err := os.Stat(filepath.Join(dir, "gemini")); err == nil {
		bs = append(bs, retryBackend{"gemini", func(t *testing.T, url string) (string, []string) {
			return geminiAgainstMock(t, dir, t.TempDir(), url)
		}})
	} else {
		t.Logf("gemini not installed (%v): its cases are left out", err)
	}
	if withOpenAI {
		bs = append(bs, retryBackend{"openai", func(t *testing.T, url string) (string, []string) {
			return fmt.Sprintf("  type: openai\n  baseUrl: %s/v1\n  apiKeyEnv: PURSER_E2E_OPENAI_KEY\n  models: {standard: gpt-5.5}", url),
				[]string{"PURSER_E2E_OPENAI_KEY=test"}
		}})
	}
	return bs
}

// retryRun is what one `purser run` left: its exit code, its output, the
// task's BUDGET.md and its calls as BUDGET.md lists them.
type retryRun struct {
	exit   int
	out    string
	budget string
	calls  []budgetCall
}

type budgetCall struct {
	kind    string
	attempt int
	outcome string
	note    string
}

// callRow is a row of BUDGET.md's calls table: | # | iteration | kind |
// attempt | model | outcome | tokens | USD | reserved | note |.
var callRow = regexp.MustCompile(`(?m)^\| \d+ \| \d+ \| (\w+) \| (\d+) \| [^|]* \| (\w+) \|[^|]*\|[^|]*\|[^|]*\|(.*)\|$`)

// runRetryTask runs one task of one iteration (so Purser's retries of its
// one call are all there is) on backend, with extra backend keys.
func runRetryTask(t *testing.T, backend, extra, goal string, env []string) retryRun {
	t.Helper()
	bin := buildPurser(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	task := fmt.Sprintf("id: retry\ngoal: %q\nworkspace: ./ws\nbackend:\n%s\n%s\nvalidators:\n  - name: file\n    run: test -f mock_out.txt\nbudget:\n  hard: {usd: 1.0, maxIterations: 1}\n",
		goal, backend, extra)
	if err := os.WriteFile(filepath.Join(dir, "task.yaml"), []byte(task), 0o644); err != nil {
		t.Fatal(err)
	}
	unboxedProject(t, dir)
	// Generous: three stalled attempts and the backoffs between them take
	// well under a minute; a CLI that waited out its own retries would take
	// many minutes, and fail here.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "task.yaml")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), env...), "PURSER_DB="+filepath.Join(dir, "purser.db"))
	out, err := cmd.CombinedOutput()
	r := retryRun{out: string(out)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("purser run: %v\n%s", err, out)
	}
	if ctx.Err() != nil {
		t.Fatalf("purser run did not end within 4 minutes:\n%s", out)
	}
	b, err := os.ReadFile(filepath.Join(ws, "BUDGET.md"))
	if err != nil {
		t.Fatalf("BUDGET.md: %v\n%s", err, out)
	}
	r.budget = string(b)
	for _, m := range callRow.FindAllStringSubmatch(r.budget, -1) {
		attempt, _ := strconv.Atoi(m[2])
		r.calls = append(r.calls, budgetCall{kind: m[1], attempt: attempt, outcome: m[3], note: strings.TrimSpace(m[4])})
	}
	return r
}

// innerRetriesShown is the count BUDGET.md gives of the requests the agents
// retried by themselves.
func innerRetriesShown(t *testing.T, budgetMD string) int {
	t.Helper()
	m := regexp.MustCompile(`(\d+) request\(s\) retried by the agents themselves`).FindStringSubmatch(budgetMD)
	if m == nil {
		t.Fatalf("BUDGET.md does not say how many requests the agents retried themselves:\n%s", budgetMD)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// agentRequests counts the mock's logged agent requests (those that offer
// tools: side calls for titles and routing do not) and how many of them got
// an injected HTTP error.
func agentRequests(t *testing.T, url string) (requests, failed int) {
	t.Helper()
	log := mockLog[struct {
		Path    string `json:"path"`
		Did     string `json:"did"`
		Summary struct {
			Tools []string `json:"tools"`
		} `json:"summary"`
	}](t, url)
	for _, r := range log {
		if strings.HasPrefix(r.Path, "/_mock/") || len(r.Summary.Tools) == 0 {
			continue
		}
		requests++
		if strings.HasPrefix(r.Did, "http_") {
			failed++
		}
	}
	return requests, failed
}

func resetMock(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Post(url+"/_mock/reset", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// mainCalls are the main calls of a run: Purser's attempts.
func mainCalls(r retryRun) []budgetCall {
	var out []budgetCall
	for _, c := range r.calls {
		if c.kind == "main" {
			out = append(out, c)
		}
	}
	return out
}

// With HTTP 500 on every request, each CLI makes one request per attempt of
// Purser's (three: the first and its two retries), and any request beyond
// those is one BUDGET.md counts as the agent's own retry. Before, Codex made
// 90 requests and Gemini CLI 30 over eleven minutes.
func TestServerErrorsAreRetriedByPurserOnly(t *testing.T) {
	url := backendtest.StartMock(t)
	for _, b := range retryBackends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			backend, env := b.setup(t, url)
			resetMock(t, url)
			r := runRetryTask(t, backend, "", "Create mock_out.txt. MOCK_TOOL MOCK_FAIL_500_ALL", env)
			requests, failed := agentRequests(t, url)
			attempts := mainCalls(r)
			inner := innerRetriesShown(t, r.budget)
			t.Logf("%s: %d agent requests (%d got HTTP 500), %d attempts by Purser, %d inner retries shown", b.name, requests, failed, len(attempts), inner)
			if r.exit != 1 {
				t.Errorf("exit %d, want 1 (the task FAILED)\n%s", r.exit, r.out)
			}
			if len(attempts) != 3 {
				t.Fatalf("%d main calls, want Purser's 3 attempts:\n%s", len(attempts), r.budget)
			}
			for _, c := range attempts {
				if c.outcome != "transient_error" || !strings.Contains(c.note, "server error") {
					t.Errorf("attempt %d: %s, %q: want a transient server error", c.attempt, c.outcome, c.note)
				}
			}
			if requests != len(attempts)+inner {
				t.Errorf("%d agent requests for %d attempts: BUDGET.md shows %d inner retries, want %d", requests, len(attempts), inner, requests-len(attempts))
			}
			if requests != 3 {
				t.Errorf("%d agent requests, want 3: one per attempt of Purser's, the CLI's own retries off", requests)
			}
		})
	}
}

// silentProvider accepts connections and never answers a byte.
func silentProvider(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	t.Cleanup(func() {
		l.Close()
		for {
			select {
			case c := <-conns:
				c.Close()
			default:
				return
			}
		}
	})
	return "http://" + l.Addr().String()
}

// A provider that accepts the connection and never answers is given up on
// after the stall window (3 s here), on every backend: each attempt ends as
// stalled, and Purser's policy retries it.
func TestSilentProviderIsGivenUpAsStalled(t *testing.T) {
	for _, b := range retryBackends(t, true) {
		t.Run(b.name, func(t *testing.T) {
			url := silentProvider(t)
			backend, env := b.setup(t, url)
			r := runRetryTask(t, backend, "  stallTimeout: 3s", "Create mock_out.txt. MOCK_TOOL", env)
			attempts := mainCalls(r)
			if len(attempts) != 3 {
				t.Fatalf("%d main calls, want Purser's 3 attempts:\n%s\n%s", len(attempts), r.budget, r.out)
			}
			for _, c := range attempts {
				if c.outcome != "stalled" || !strings.Contains(c.note, "stalled: no bytes from") {
					t.Errorf("attempt %d: %s, %q: want it ended as stalled", c.attempt, c.outcome, c.note)
				}
			}
			if !strings.Contains(r.budget, "3 call(s) stalled") {
				t.Errorf("BUDGET.md does not count the stalled calls:\n%s", r.budget)
			}
		})
	}
}

// A closed port is a refused connection on every backend: transient, so
// retried by Purser's policy, and bounded by it (Codex alone would wait for
// the network without end).
func TestClosedPortIsRefusedEverywhere(t *testing.T) {
	for _, b := range retryBackends(t, true) {
		t.Run(b.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			url := "http://" + l.Addr().String()
			l.Close()
			backend, env := b.setup(t, url)
			r := runRetryTask(t, backend, "", "Create mock_out.txt. MOCK_TOOL", env)
			attempts := mainCalls(r)
			if len(attempts) != 3 {
				t.Fatalf("%d main calls, want Purser's 3 attempts:\n%s\n%s", len(attempts), r.budget, r.out)
			}
			for _, c := range attempts {
				if c.outcome != "transient_error" || !strings.Contains(c.note, "connection refused") {
					t.Errorf("attempt %d: %s, %q: want a transient refused connection", c.attempt, c.outcome, c.note)
				}
			}
		})
	}
}

// Where a CLI's own retries cannot be switched off — Codex on a provider
// whose settings Purser may not change (here the backend is told the
// provider is the built-in openai, so no -c settings are passed) — the
// retries it announces are counted in BUDGET.md. Codex announces only its
// stream reconnects, not the request retries inside each: the count is a
// lower bound of the extra requests, and says so in the README.
func TestUncappedRetriesAreCounted(t *testing.T) {
	url := backendtest.StartMock(t)
	var codex retryBackend
	for _, b := range retryBackends(t, false) {
		if b.name == "codex" {
			codex = b
		}
	}
	backend, env := codex.setup(t, url)
	resetMock(t, url)
	// The first five agent requests fail: Codex's four request retries
	// exhaust, then one stream reconnect gets through.
	r := runRetryTask(t, backend, "  provider: openai", "Create mock_out.txt. MOCK_TOOL MOCK_FAIL_500_5", env)
	requests, failed := agentRequests(t, url)
	inner := innerRetriesShown(t, r.budget)
	attempts := mainCalls(r)
	t.Logf("codex uncapped: %d agent requests (%d got HTTP 500), %d attempts by Purser, %d inner retries shown", requests, failed, len(attempts), inner)
	if r.exit != 0 || len(attempts) != 1 {
		t.Fatalf("exit %d after %d attempts: want the task DONE in one, Codex retrying by itself\n%s\n%s", r.exit, len(attempts), r.budget, r.out)
	}
	if failed != 5 || inner < 1 || inner > failed {
		t.Fatalf("%d requests failed, %d inner retries shown: want 5 failed, and at least one, at most 5, counted", failed, inner)
	}
	if !strings.Contains(attempts[0].note, fmt.Sprintf("%d request(s) retried by the agent itself", inner)) {
		t.Errorf("the call's note does not give its inner retries: %q", attempts[0].note)
	}
}
