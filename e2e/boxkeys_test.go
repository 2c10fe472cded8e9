package e2e_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser/backend/backendtest"
)

// e2eRealKey is the provider key Purser holds in these tests: the mock logs
// a key only by its length, so it is of a length no door token has
// ("purser-" and 48 hex digits: 55).
const e2eRealKey = "sk-e2e-real-key-00021"

// Issues 20 and 21: the three real CLIs, in the box and out of it, their
// provider key held at the door. Each is DONE with the ledger exact; every
// process of the CLI (and of its box) holds the door's scoped token under
// the key's name and never the real key; every model request the mock
// answered carried the real key (its length, in the protocol's place),
// never the token.
func TestCLIsKeysHeldAtTheDoor(t *testing.T) {
	dir := clis(t)
	for _, boxed := range []bool{true, false} {
		t.Run(map[bool]string{true: "boxed", false: "unboxed"}[boxed], func(t *testing.T) {
			if boxed {
				requireBox(t)
			}
			keysHeldAtTheDoor(t, dir, boxed)
		})
	}
}

func keysHeldAtTheDoor(t *testing.T, dir string, boxed bool) {
	for _, c := range []struct {
		name   string
		setup  func(t *testing.T, dir, home, url string) (string, []string)
		keyVar string
		header string // where the mock sees the key
		prefix string // before the key in that header
		tok    int64
		usd    float64
	}{
		{"claude", claudeAgainstMock, "ANTHROPIC_API_KEY", "x-api-key", "", 11465, 0.012525},
		{"codex", codexAgainstMock, "MOCK_API_KEY", "authorization", "Bearer ", 11065, 0.0187},
		{"gemini", geminiAgainstMock, "GEMINI_API_KEY", "x-goog-api-key", "", 11085, 0.0050375},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := backendtest.StartMock(t)
			backend, env := c.setup(t, dir, t.TempDir(), url)
			env = withEnv(env, c.keyVar, e2eRealKey)
			// The mark finds the CLI's processes (and its box's) by their
			// environment: the backend's env: passes it to them, not to purser.
			mark := fmt.Sprintf("%s-%d", c.name, time.Now().UnixNano())
			backend = strings.Replace(backend, "env: {", "env: {E2E_KEYS_MARK: "+mark+", ", 1)
			if boxed {
				backend += "\n  sandbox: on"
			}
			stop := watchEnv(mark, c.keyVar, e2eRealKey)
			runScenario(t, scenario{name: "keys-" + c.name, goal: goalDone, budget: budgetDone, wantExit: 0, wantState: "DONE",
				wantTok: c.tok, wantUSD: c.usd, backend: backend, env: append(env, "XDG_STATE_HOME="+t.TempDir())})
			seen := stop()
			if len(seen) == 0 {
				t.Fatal("no process of the CLI was seen")
			}
			for _, p := range seen {
				if p.real || !strings.HasPrefix(p.key, "purser-") {
					t.Errorf("%s: real key in its environment %v, $%s a token %v; want only the door's token",
						p.cmd, p.real, c.keyVar, strings.HasPrefix(p.key, "purser-"))
				}
			}
			t.Logf("%d processes of the CLI seen, each with the door's token as $%s, none with the real key", len(seen), c.keyVar)
			checkMockKeys(t, url, c.header, len(c.prefix)+len(e2eRealKey))
		})
	}
}

// withEnv is env with name set to value (any earlier setting of it
// dropped).
func withEnv(env []string, name, value string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+value)
}

// checkMockKeys checks that every model request the mock logged carried a
// key of the real key's length in header, and that none carried anything
// else where a key goes.
func checkMockKeys(t *testing.T, url, header string, wantLen int) {
	t.Helper()
	type entry struct {
		Path    string            `json:"path"`
		Headers map[string]string `json:"headers"`
	}
	want := fmt.Sprintf("<redacted len=%d>", wantLen)
	models := 0
	for _, e := range mockLog[entry](t, url) {
		if strings.HasPrefix(e.Path, "/_mock/") {
			continue
		}
		models++
		if got := e.Headers[header]; got != want {
			t.Errorf("%s: the mock saw %s %q; want the real key's %q (the door's token is 55 long)", e.Path, header, got, want)
		}
		for _, h := range []string{"x-api-key", "authorization", "x-goog-api-key"} {
			if h != header && e.Headers[h] != "" {
				t.Errorf("%s: the mock saw %s %q beside the key", e.Path, h, e.Headers[h])
			}
		}
	}
	if models == 0 {
		t.Fatal("the mock logged no model request")
	}
	t.Logf("%d model requests, each with the real key (%s)", models, want)
}

// procEnv is what a process of the CLI held: whether the real key was
// anywhere in its environment, and keyVar's value.
type procEnv struct {
	cmd  string
	real bool
	key  string
}

// watchEnv reads, every 10 ms until stopped, the environment of every
// process whose environment holds mark, noting whether secret is in it;
// stop returns one entry per process seen.
func watchEnv(mark, keyVar, secret string) (stop func() []procEnv) {
	done := make(chan struct{})
	var mu sync.Mutex
	seen := map[string]procEnv{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			entries, _ := os.ReadDir("/proc")
			for _, e := range entries {
				b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
				if err != nil || !bytes.Contains(b, []byte("E2E_KEYS_MARK="+mark)) {
					continue
				}
				p := procEnv{real: bytes.Contains(b, []byte(secret))}
				for _, kv := range strings.Split(string(b), "\x00") {
					if v, ok := strings.CutPrefix(kv, keyVar+"="); ok {
						p.key = v
					}
				}
				cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
				p.cmd = e.Name() + ": " + strings.ReplaceAll(string(cmdline), "\x00", " ")
				mu.Lock()
				seen[e.Name()] = p
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() []procEnv {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		var out []procEnv
		for _, p := range seen {
			out = append(out, p)
		}
		return out
	}
}

// Claude Code's browser login (login: claude), in the box and out: Purser
// reads the access token from the user's ~/.claude/.credentials.json (here
// a fake one), the door holds it and sends it as Authorization: Bearer;
// the CLI holds only the door's token, as CLAUDE_CODE_OAUTH_TOKEN.
func TestClaudeLoginHeldAtTheDoor(t *testing.T) {
	dir := clis(t)
	const access = "sk-ant-oat01-e2e-fake-0000033" // 29 long: no token is
	for _, boxed := range []bool{true, false} {
		t.Run(map[bool]string{true: "boxed", false: "unboxed"}[boxed], func(t *testing.T) {
			if boxed {
				requireBox(t)
			}
			url := backendtest.StartMock(t)
			home := t.TempDir()
			if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o700); err != nil {
				t.Fatal(err)
			}
			creds := `{"claudeAiOauth":{"accessToken":"` + access + `","refreshToken":"sk-ant-ort01-fake","expiresAt":4102444800000,"scopes":["user:inference"],"subscriptionType":"max"}}`
			if err := os.WriteFile(filepath.Join(home, ".claude", ".credentials.json"), []byte(creds), 0o600); err != nil {
				t.Fatal(err)
			}
			backend, env := claudeAgainstMock(t, dir, home, url)
			env = withEnv(env, "ANTHROPIC_API_KEY", "")
			mark := fmt.Sprintf("login-%d", time.Now().UnixNano())
			backend = strings.Replace(backend, "env: {", "env: {E2E_KEYS_MARK: "+mark+", ", 1) + "\n  login: claude"
			if boxed {
				backend += "\n  sandbox: on"
			}
			stop := watchEnv(mark, "CLAUDE_CODE_OAUTH_TOKEN", access)
			runScenario(t, scenario{name: "login-claude", goal: goalDone, budget: budgetDone, wantExit: 0, wantState: "DONE",
				wantTok: 11465, wantUSD: 0.012525, backend: backend, env: append(env, "XDG_STATE_HOME="+t.TempDir())})
			seen := stop()
			if len(seen) == 0 {
				t.Fatal("no process of the CLI was seen")
			}
			// Claude Code keeps CLAUDE_CODE_OAUTH_TOKEN from its tools'
			// shells: those hold none; the CLI itself holds the token.
			withToken := 0
			for _, p := range seen {
				switch {
				case p.real:
					t.Errorf("%s: the login's access token is in its environment", p.cmd)
				case strings.HasPrefix(p.key, "purser-"):
					withToken++
				case p.key != "":
					t.Errorf("%s: $CLAUDE_CODE_OAUTH_TOKEN is not the door's token", p.cmd)
				}
			}
			if withToken == 0 {
				t.Errorf("no process of the CLI held the door's token as $CLAUDE_CODE_OAUTH_TOKEN")
			}
			checkMockKeys(t, url, "authorization", len("Bearer ")+len(access))
		})
	}
}
