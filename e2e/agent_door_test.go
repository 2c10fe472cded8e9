package e2e_test

// Agents no one here wrote — OpenCode, Qwen Code and Cline, pinned from npm
// — budgeted through `type: agent` (Purser's door, docs/gateway.md) against
// the fake LLM server. docs/agents.md says what each sends and what the
// mock answers; the figures below are those sums.

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/sandbox"
)

// agentsDir is where `.ci/run` installs the agents: PURSER_E2E_AGENTS, a
// directory holding the opencode, qwen and cline executables.
func agentsDir(t *testing.T, bin string) string {
	t.Helper()
	dir := os.Getenv("PURSER_E2E_AGENTS")
	if dir == "" {
		t.Skip("PURSER_E2E_AGENTS is not set: the agents were not installed (.ci/run installs OpenCode, Qwen Code and Cline from npm; see docs/agents.md)")
	}
	if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
		t.Skipf("%s not installed in %s (npm could not be reached?): %v", bin, dir, err)
	}
	return dir
}

// realKey is the provider key Purser holds: the door puts it on every
// request upstream, and the agent never gets it (it gets a scoped token).
const realKey = "purser-e2e-real-key-0123456789"

// agentSetup is one agent's backend mapping (YAML, indented under
// backend:) against the mock at url, with its state under home.
type agentSetup func(t *testing.T, bin, home, url string) string

// opencodeBackend: OpenCode on the Anthropic wire; the config reads the
// door's URL from ANTHROPIC_BASE_URL, and every switch keeps it off any
// other network (docs/agents.md).
func opencodeBackend(_ *testing.T, bin, home, url string) string {
	cfg := `{"autoupdate":false,"share":"disabled","provider":{"anthropic":{"options":{"baseURL":"{env:ANTHROPIC_BASE_URL}/v1"}}},"permission":{"*":"allow"}}`
	return fmt.Sprintf(`  type: agent
  wire: anthropic
  command: [%s, run, -m, "anthropic/{model}", "{prompt}"]
  models: {standard: claude-sonnet-4-5}
  upstream: %s
  key: {env: PURSER_E2E_REAL_KEY}
  env:
    HOME: %s
    OPENCODE_CONFIG_CONTENT: '%s'
    OPENCODE_PURE: "1"
    npm_config_offline: "true"
    OPENCODE_DISABLE_AUTOUPDATE: "1"
    OPENCODE_DISABLE_MODELS_FETCH: "1"
    OPENCODE_DISABLE_SHARE: "1"
    OPENCODE_DISABLE_LSP_DOWNLOAD: "1"
    OPENCODE_DISABLE_DEFAULT_PLUGINS: "1"
    OPENCODE_DISABLE_PROJECT_CONFIG: "1"
    OPENCODE_DISABLE_CLAUDE_CODE: "1"`, filepath.Join(bin, "opencode"), url, home, cfg)
}

// qwenBackend: Qwen Code on the OpenAI Chat wire, with system settings
// (they outrank the user's and the repository's) that switch its usage
// statistics off and declare the model with no baseUrl of its own, so that
// a repository's .qwen/settings.json cannot give it one: it goes to
// $OPENAI_BASE_URL, the door.
func qwenBackend(t *testing.T, bin, home, url string) string {
	t.Helper()
	settings := filepath.Join(home, "qwen-settings.json")
	if err := os.WriteFile(settings, []byte(`{"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},"general":{"disableAutoUpdate":true,"disableUpdateNag":true},`+
		`"modelProviders":{"openai":[{"id":"gpt-5.5","name":"gpt-5.5","envKey":"OPENAI_API_KEY"}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`  type: agent
  wire: openai-chat
  command: [%s, --auth-type, openai, -m, "{model}", --yolo, "{prompt}"]
  models: {standard: gpt-5.5}
  upstream: %s/v1
  key: {env: PURSER_E2E_REAL_KEY}
  env:
    HOME: %s
    QWEN_CODE_SYSTEM_SETTINGS_PATH: %s
    QWEN_CODE_SUPPRESS_YOLO_WARNING: "1"`, filepath.Join(bin, "qwen"), url, home, settings)
}

// clineBackend: Cline on the OpenAI Chat wire. Cline reads an
// OpenAI-compatible base URL and key only from its data directory, so the
// command writes them there from the door's variables first; --data-dir
// also keeps it from starting a detached hub daemon.
func clineBackend(_ *testing.T, bin, home, url string) string {
	cline := filepath.Join(bin, "cline")
	script := fmt.Sprintf(`%[1]s auth -p openai -k "$OPENAI_API_KEY" -b "$OPENAI_BASE_URL" -m "$1" --data-dir "$HOME/.cline-purser" >/dev/null && exec %[1]s --data-dir "$HOME/.cline-purser" "$2"`, cline)
	return fmt.Sprintf(`  type: agent
  wire: openai-chat
  command: [sh, -c, %q, sh, "{model}", "{prompt}"]
  models: {standard: gpt-5.5}
  upstream: %s/v1
  key: {env: PURSER_E2E_REAL_KEY}
  env:
    HOME: %s`, script, url, home)
}

// agentScenario is one `purser run` of an agent's task.
type agentScenario struct {
	name      string
	goal      string
	budget    string
	validator string // a shell command: DONE when it passes
	wantExit  int
	wantState string
	// The ledger: exactly wantTok tokens and wantUSD dollars (estimated),
	// the sum of the mock's replies' fixed usage (docs/agents.md).
	wantTok int64
	wantUSD float64
	// wantRequests are the models of the requests the mock answered, in
	// order: the agent's own extra ones (titles, memory) included.
	wantRequests []string
	// wantNote is a part of the call's note (the door's count of what
	// crossed it: requests, replies booked, refused, cut mid-reply).
	wantNote string
	// wsFiles are written into the workspace, made a git repository,
	// before the run ("{mock}" in a file is the mock's URL): a
	// repository's own settings.
	wsFiles map[string]string
	// check, when set, looks at what the agent left in its HOME and
	// workspace after the run.
	check func(t *testing.T, ws, home string)
	// boxed runs the agent with sandbox: on — its HOME the box's, the npm
	// install read-only, the door its only way out.
	boxed bool
}

type mockRequest struct {
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Summary struct {
		Model string `json:"model"`
	} `json:"summary"`
}

func runAgent(t *testing.T, bin string, setup agentSetup, sc agentScenario) {
	purser := buildPurser(t)
	url := backendtest.StartMock(t)
	dir := t.TempDir()
	ws, home := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	for _, d := range []string{ws, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if len(sc.wsFiles) > 0 {
		// A repository: OpenCode reads a project's config only in one.
		if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
	}
	for name, body := range sc.wsFiles {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), []byte(strings.ReplaceAll(body, "{mock}", url)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	backendYAML := setup(t, bin, home, url)
	if sc.boxed {
		if err := sandbox.Available(); err != nil {
			// The box is a security boundary: where CI requires it
			// (PURSER_TEST_SANDBOX=required, .ci/run), not having one fails.
			if os.Getenv("PURSER_TEST_SANDBOX") == "required" {
				t.Fatal("PURSER_TEST_SANDBOX=required but no box can be made here:", err)
			}
			t.Skip("no box can be made here:", err)
		}
		// The box has its own HOME; the agents' npm install (the .bin links
		// point into it) and home (Qwen's settings file) are read-only in it.
		var kept []string
		for _, l := range strings.Split(backendYAML, "\n") {
			if !strings.HasPrefix(l, "    HOME: ") {
				kept = append(kept, l)
			}
		}
		if kept[len(kept)-1] == "  env:" { // HOME was its only entry
			kept = kept[:len(kept)-1]
		}
		backendYAML = strings.Join(kept, "\n") + fmt.Sprintf("\n  sandbox: {mode: on, readOnly: [%s, %s]}", filepath.Dir(bin), home)
	}
	task := fmt.Sprintf("id: %s\ngoal: %q\nworkspace: ./ws\nbackend:\n%s\nvalidators:\n  - name: check\n    run: %q\nbudget:\n%s\n",
		sc.name, sc.goal, backendYAML, sc.validator, sc.budget)
	if err := os.WriteFile(filepath.Join(dir, "task.yaml"), []byte(task), 0o644); err != nil {
		t.Fatal(err)
	}
	unboxedProject(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	db := filepath.Join(dir, "purser.db")
	cmd := exec.CommandContext(ctx, purser, "run", "task.yaml")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PURSER_DB="+db, "PURSER_E2E_REAL_KEY="+realKey)
	var out, stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		out.WriteString(lines.Text() + "\n")
	}
	err = cmd.Wait()
	took := time.Since(start)
	out.WriteString(stderr.String())
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != sc.wantExit {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, sc.wantExit, task, out.String())
	}
	// The agent's process group is gone: nothing runs in the workspace.
	deadline := time.Now().Add(30 * time.Second)
	for len(processesIn(ws)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if left := processesIn(ws); len(left) > 0 {
		t.Errorf("processes still running in the workspace 30 s after purser exited: %v", left)
	}
	st, err := exec.Command(purser, "status", sc.name, "--json", "--db", db).Output()
	if err != nil {
		t.Fatal(err)
	}
	var status struct{ Tasks []taskStatus }
	if err := json.Unmarshal(st, &status); err != nil || len(status.Tasks) != 1 {
		t.Fatalf("status: %v %s", err, st)
	}
	got := status.Tasks[0]
	log := mockLog[mockRequest](t, url)
	var models []string
	for _, r := range log {
		if strings.HasPrefix(r.Path, "/_mock") || r.Summary.Model == "" {
			continue
		}
		models = append(models, r.Summary.Model)
		// The door put the real key upstream (the mock logs its length only).
		k := r.Headers["x-api-key"] + r.Headers["authorization"]
		if !strings.Contains(k, fmt.Sprintf("len=%d>", len(realKey))) && !strings.Contains(k, fmt.Sprintf("len=%d>", len("Bearer "+realKey))) {
			t.Errorf("request %s to the mock carried %q, not the real key Purser holds", r.Path, k)
		}
	}
	t.Logf("%s: exit %d in %s, %s, %d tokens, $%f %s; the mock answered %d request(s): %v",
		sc.name, code, took.Round(time.Millisecond), got.Status, got.Budget.UsedTokens, got.Budget.UsedUSD, got.Budget.USDSource, len(models), models)
	if got.Status != sc.wantState || (got.Budget.UsedTokens > 0 && got.Budget.USDSource != "estimated") {
		t.Fatalf("status %+v, want %s, dollars estimated\n%s", got, sc.wantState, out.String())
	}
	if got.Budget.UsedTokens != sc.wantTok || fmt.Sprintf("%.6f", got.Budget.UsedUSD) != fmt.Sprintf("%.6f", sc.wantUSD) {
		t.Errorf("ledger %d tokens, $%f; the mock's replies: %d tokens, $%f", got.Budget.UsedTokens, got.Budget.UsedUSD, sc.wantTok, sc.wantUSD)
	}
	if sc.wantRequests != nil && fmt.Sprint(models) != fmt.Sprint(sc.wantRequests) {
		t.Errorf("the mock answered requests for %v, want %v (has the agent's behaviour changed? docs/agents.md)", models, sc.wantRequests)
	}
	if note := callNotes(t, db); !strings.Contains(note, sc.wantNote) {
		t.Errorf("the call's note %q does not say %q", note, sc.wantNote)
	}
	for _, f := range []string{"STATUS.md", "BUDGET.md"} {
		if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	if sc.check != nil {
		sc.check(t, ws, home)
	}
}

// openCodeInWorkspace checks, from OpenCode's own log, that its session
// ran in the workspace. OpenCode takes its directory from $PWD, not from
// the process's working directory: an agent given Purser's own $PWD works
// (reads, writes, runs its tools) wherever purser was started.
func openCodeInWorkspace(t *testing.T, ws, home string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(home, ".local", "share", "opencode", "log", "*.log"))
	if len(logs) == 0 {
		t.Fatalf("no OpenCode log under %s", home)
	}
	var dirs []string
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "message=created id=ses_") {
				continue
			}
			_, d, _ := strings.Cut(line, " directory=")
			d, _, _ = strings.Cut(d, " ")
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 || slices.ContainsFunc(dirs, func(d string) bool { return d != ws }) {
		t.Errorf("OpenCode's sessions ran in %v, want the workspace %s (is $PWD the workspace in the agent's environment?)", dirs, ws)
	}
}

// callNotes is every call's note in the database, one a line: the door
// says there how many requests crossed it, were booked, refused and cut.
func callNotes(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT note FROM calls ORDER BY started_at`)
	if err != nil {
		t.Fatalf("reading the calls' notes: %v", err)
	}
	defer rows.Close()
	var notes []string
	for rows.Next() {
		var n sql.NullString
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		notes = append(notes, n.String)
	}
	return strings.Join(notes, "\n")
}

const (
	// goalPlain: the mock answers OpenCode's and Qwen Code's tools with
	// "done" at once (it knows none of them); Cline's apply_patch it calls.
	goalPlain = "Create mock_out.txt. MOCK_TOOL"
	// goalHang: every agent request hangs 120 s before its reply.
	goalHang = "Create mock_out.txt. MOCK_TOOL MOCK_SLOW_120"
	// goalHangAfter: the request after the first tool result hangs 120 s.
	goalHangAfter = "Create mock_out.txt. MOCK_TOOL MOCK_SLOWAFTER_120"
	budgetUSD     = "  hard: {usd: 1.0, maxIterations: 3}"
	budgetTok     = "  hard: {tokens: 3000, maxIterations: 3}"
	budgetTime    = "  hard: {timeMinutes: 1, maxIterations: 3}"
	noCheck       = "true"
	fileCheck     = "test -f mock_out.txt"
	// notDone: a cap run's validator must not pass, or the task would be
	// DONE after a cap that rightly ends the call.
	notDone = "test -f mock_out_2.txt"
)

// The three agents' tests run in parallel with each other (each scenario
// after the other within one): with the CLIs' tests before them, the e2e
// package stays within go test's default 10-minute limit.

func TestOpenCode(t *testing.T) {
	bin := agentsDir(t, "opencode")
	t.Parallel()
	for _, sc := range []agentScenario{
		// The session title (OpenCode's own request, on its small model,
		// Haiku 4.5: 53 tokens, $0.000065) and the answer (the mock's usage
		// for a MOCK_TOOL request on /v1/messages: 5,560 tokens, $0.006825).
		{name: "opencode-done", goal: goalPlain, budget: budgetUSD, validator: noCheck, wantExit: 0, wantState: "DONE",
			wantTok: 5613, wantUSD: 0.00689, wantRequests: []string{"claude-haiku-4-5-20251001", "claude-sonnet-4-5"},
			wantNote: "door (anthropic): 2 request(s), 2 reply(ies) booked", check: openCodeInWorkspace},
		// The same in the box: the door is its only way out.
		{name: "opencode-boxed", goal: goalPlain, budget: budgetUSD, validator: noCheck, wantExit: 0, wantState: "DONE",
			wantTok: 5613, wantUSD: 0.00689, wantRequests: []string{"claude-haiku-4-5-20251001", "claude-sonnet-4-5"},
			wantNote: "door (anthropic): 2 request(s), 2 reply(ies) booked", boxed: true},
		// A repository's opencode.json sends OpenCode's title requests
		// straight to the provider (here the mock) on a provider of its own,
		// with a key of its own: ignored (OPENCODE_DISABLE_PROJECT_CONFIG;
		// without it the title goes around the door, unbooked), every request
		// still crosses the door (each reached the mock with the real key)
		// and is booked.
		{name: "opencode-repo-config", goal: goalPlain, budget: budgetUSD, validator: noCheck, wantExit: 0, wantState: "DONE",
			wantTok: 5613, wantUSD: 0.00689, wantRequests: []string{"claude-haiku-4-5-20251001", "claude-sonnet-4-5"},
			wantNote: "door (anthropic): 2 request(s), 2 reply(ies) booked",
			wsFiles: map[string]string{"opencode.json": `{"provider":{"anthropic":{"options":{"baseURL":"{mock}/v1"}},` +
				`"direct":{"npm":"@ai-sdk/anthropic","options":{"baseURL":"{mock}/v1","apiKey":"not-through-the-door"},"models":{"claude-haiku-4-5":{}}}},` +
				`"small_model":"direct/claude-haiku-4-5"}`},
			check: openCodeInWorkspace},
		// A 3,000-token cap: the small title request fits and is booked; the
		// answer's request, whose input alone is counted over the cap at the
		// door, is refused before it reaches the provider (per-request
		// admission, issue 21): BLOCKED, the agent stopped, the ledger the
		// title's reply to the token.
		{name: "opencode-cap", goal: goalPlain, budget: budgetTok, validator: notDone, wantExit: 3, wantState: "BLOCKED",
			wantTok: 53, wantUSD: 0.000065, wantRequests: []string{"claude-haiku-4-5-20251001"},
			wantNote: "door (anthropic): 1 request(s), 1 reply(ies) booked, 1 refused"},
		// The answer hangs 120 s: the time cap cuts it in flight, before
		// any of it came (the door counts it refused); only the title is
		// booked — the mock billed nothing else.
		{name: "opencode-time", goal: goalHang, budget: budgetTime, validator: notDone, wantExit: 3, wantState: "BLOCKED",
			wantTok: 53, wantUSD: 0.000065, wantRequests: []string{"claude-haiku-4-5-20251001"},
			wantNote: "door (anthropic): 2 request(s), 1 reply(ies) booked, 1 refused"},
	} {
		t.Run(sc.name, func(t *testing.T) { runAgent(t, bin, opencodeBackend, sc) })
	}
}

func TestQwenCode(t *testing.T) {
	bin := agentsDir(t, "qwen")
	t.Parallel()
	for _, sc := range []agentScenario{
		// The answer and Qwen's own memory-extraction request after it:
		// 2 × 5,805 tokens, 2 × $0.0089 at gpt-5.5 prices.
		{name: "qwen-done", goal: goalPlain, budget: budgetUSD, validator: noCheck, wantExit: 0, wantState: "DONE",
			wantTok: 11610, wantUSD: 0.0178, wantRequests: []string{"gpt-5.5", "gpt-5.5"},
			wantNote: "door (openai-chat): 2 request(s), 2 reply(ies) booked"},
		{name: "qwen-boxed", goal: goalPlain, budget: budgetUSD, validator: noCheck, wantExit: 0, wantState: "DONE",
			wantTok: 11610, wantUSD: 0.0178, wantRequests: []string{"gpt-5.5", "gpt-5.5"},
			wantNote: "door (openai-chat): 2 request(s), 2 reply(ies) booked", boxed: true},
		// A repository's .qwen/settings.json gives the model a baseUrl
		// straight to the provider (here the mock): the system settings'
		// entry for the model wins, and every request crosses the door.
		{name: "qwen-repo-config", goal: goalPlain, budget: budgetUSD, validator: noCheck, wantExit: 0, wantState: "DONE",
			wantTok: 11610, wantUSD: 0.0178, wantRequests: []string{"gpt-5.5", "gpt-5.5"},
			wantNote: "door (openai-chat): 2 request(s), 2 reply(ies) booked",
			wsFiles:  map[string]string{".qwen/settings.json": `{"modelProviders":{"openai":[{"id":"gpt-5.5","name":"gpt-5.5","baseUrl":"{mock}/v1","envKey":"OPENAI_API_KEY"}]}}`}},
		// A 3,000-token cap under the answer's counted input: the door
		// refuses the first request before it reaches the provider, and
		// nothing is spent (per-request admission, issue 21).
		{name: "qwen-cap", goal: goalPlain, budget: budgetTok, validator: notDone, wantExit: 3, wantState: "BLOCKED",
			wantTok: 0, wantUSD: 0, wantRequests: []string{}, wantNote: "door (openai-chat): 0 request(s), 0 reply(ies) booked, 1 refused"},
		// The answer hangs 120 s: the time cap cuts it in flight, before
		// any of it came; nothing was billed.
		{name: "qwen-time", goal: goalHang, budget: budgetTime, validator: notDone, wantExit: 3, wantState: "BLOCKED",
			wantTok: 0, wantUSD: 0, wantRequests: []string{},
			wantNote: "door (openai-chat): 1 request(s), 0 reply(ies) booked, 1 refused"},
	} {
		t.Run(sc.name, func(t *testing.T) { runAgent(t, bin, qwenBackend, sc) })
	}
}

func TestCline(t *testing.T) {
	bin := agentsDir(t, "cline")
	t.Parallel()
	for _, sc := range []agentScenario{
		// apply_patch writes mock_out.txt, then "done": 5,260 + 5,805
		// tokens, $0.0098 + $0.0089 at gpt-5.5 prices (Codex's figures).
		{name: "cline-done", goal: goalPlain, budget: budgetUSD, validator: fileCheck, wantExit: 0, wantState: "DONE",
			wantTok: 11065, wantUSD: 0.0187, wantRequests: []string{"gpt-5.5", "gpt-5.5"},
			wantNote: "door (openai-chat): 2 request(s), 2 reply(ies) booked"},
		{name: "cline-boxed", goal: goalPlain, budget: budgetUSD, validator: fileCheck, wantExit: 0, wantState: "DONE",
			wantTok: 11065, wantUSD: 0.0187, wantRequests: []string{"gpt-5.5", "gpt-5.5"},
			wantNote: "door (openai-chat): 2 request(s), 2 reply(ies) booked", boxed: true},
		// A 3,000-token cap under the first request's counted input: the
		// door refuses it before it reaches the provider, and nothing is
		// spent (per-request admission, issue 21).
		{name: "cline-cap", goal: goalHangAfter, budget: budgetTok, validator: notDone, wantExit: 3, wantState: "BLOCKED",
			wantTok: 0, wantUSD: 0, wantRequests: []string{}, wantNote: "door (openai-chat): 0 request(s), 0 reply(ies) booked, 1 refused"},
		// The second request hangs 120 s: the time cap cuts it in flight.
		{name: "cline-time", goal: goalHangAfter, budget: budgetTime, validator: notDone, wantExit: 3, wantState: "BLOCKED",
			wantTok: 5260, wantUSD: 0.0098, wantRequests: []string{"gpt-5.5"},
			wantNote: "door (openai-chat): 2 request(s), 1 reply(ies) booked, 1 refused"},
	} {
		t.Run(sc.name, func(t *testing.T) { runAgent(t, bin, clineBackend, sc) })
	}
}
