package proc_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/backend/codex"
	"github.com/purser-dev/purser/backend/gemini"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/sandbox"
)

// keyUpstream is an httptest provider that records the credentials each
// request carried (every header a key may be in, and ?key=).
type keyUpstream struct {
	mu   sync.Mutex
	seen []string // "header: value"
}

func (k *keyUpstream) start(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		k.mu.Lock()
		for _, h := range []string{"X-Api-Key", "Authorization", "X-Goog-Api-Key"} {
			if v := r.Header.Get(h); v != "" {
				k.seen = append(k.seen, h+": "+v)
			}
		}
		if v := r.URL.Query().Get("key"); v != "" {
			k.seen = append(k.seen, "?key="+v)
		}
		k.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (k *keyUpstream) all() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.seen...)
}

// keyCase is one CLI backend set up against an upstream, with its real key
// in Purser's environment.
type keyCase struct {
	name   string
	varKey string // the variable the CLI reads its key from
	header string // where the provider wants it: "X-Api-Key: " + key
	opts   func(t *testing.T, home, upstream string) map[string]any
	build  func(purser.BackendSpec) (purser.Backend, error)
	others []string // more provider keys of Purser's that must not reach the CLI
}

const realCLIKey = "sk-real-0123456789" // a length no token has

func keyCases() []keyCase {
	return []keyCase{
		{"claude", "ANTHROPIC_API_KEY", "X-Api-Key: " + realCLIKey, func(t *testing.T, home, up string) map[string]any {
			return map[string]any{"KEY_CLI_API": "anthropic", "KEY_CLI_VAR": "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL": up}
		}, func(s purser.BackendSpec) (purser.Backend, error) { return claude.New(s) }, nil},
		{"codex", "MOCK_API_KEY", "Authorization: Bearer " + realCLIKey, func(t *testing.T, home, up string) map[string]any {
			cfg := "model_provider = \"mock\"\nmodel = \"gpt-5.5\"\n[model_providers.mock]\nname = \"mock\"\nbase_url = \"" + up + "/v1\"\nenv_key = \"MOCK_API_KEY\"\nwire_api = \"responses\"\n"
			if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			return map[string]any{"KEY_CLI_API": "responses", "KEY_CLI_VAR": "MOCK_API_KEY", "CODEX_HOME": home}
		}, func(s purser.BackendSpec) (purser.Backend, error) { return codex.New(s) }, []string{"OPENAI_API_KEY", "CODEX_API_KEY"}},
		{"gemini", "GEMINI_API_KEY", "X-Goog-Api-Key: " + realCLIKey, func(t *testing.T, home, up string) map[string]any {
			return map[string]any{"KEY_CLI_API": "gemini", "KEY_CLI_VAR": "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL": up}
		}, func(s purser.BackendSpec) (purser.Backend, error) { return gemini.New(s) }, []string{"GOOGLE_API_KEY"}},
	}
}

// cliSpec is a backend spec of the fake key CLI, boxed or not.
func cliSpec(t *testing.T, typ, ws string, opts map[string]any, boxed bool) purser.BackendSpec {
	t.Helper()
	script, err := filepath.Abs("testdata/key-cli.py")
	if err != nil {
		t.Fatal(err)
	}
	raw := map[string]any{"command": script}
	for k, v := range opts {
		if k == "wireMeter" || k == "login" || k == "keyFile" {
			raw[k] = v
			delete(opts, k)
		}
	}
	raw["env"] = opts
	o := backend.Types{"claude": claude.NewOptions, "codex": codex.NewOptions, "gemini": gemini.NewOptions}[typ]()
	if p := backend.DecodeRaw(raw, o, nil); len(p) > 0 {
		t.Fatalf("options: %+v", p)
	}
	if boxed {
		requireBox(t)
		o.(backend.Boxable).SetSandbox(backend.SandboxConfig{Setting: sandbox.Setting{Mode: sandbox.ModeOn}, Homes: filepath.Join(t.TempDir(), "boxes")})
	}
	return purser.BackendSpec{Type: typ, Dir: ws, Options: o}
}

// readJSON reads a file the fake CLI wrote in the workspace.
func readJSON[T any](t *testing.T, path string) T {
	t.Helper()
	var v T
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the CLI wrote no %s: %v", filepath.Base(path), err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Issues 20 and 21: the door holds each CLI's real key. The CLI, unboxed
// and boxed, has only the call's scoped token, under the very name it reads
// its key from, and none of Purser's other provider keys; the provider gets
// the real key in its protocol's own place and never the token; a request
// with any other key is refused by the door.
func TestTheDoorHoldsTheCLIsKey(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, tc := range keyCases() {
		for _, boxed := range []bool{false, true} {
			name := tc.name + "/unboxed"
			if boxed {
				name = tc.name + "/boxed"
			}
			t.Run(name, func(t *testing.T) {
				t.Setenv(tc.varKey, realCLIKey)
				for _, o := range tc.others {
					t.Setenv(o, "sk-other-secret")
				}
				up := &keyUpstream{}
				url := up.start(t)
				home, ws := t.TempDir(), t.TempDir()
				opts := tc.opts(t, home, url)
				opts["HOME"] = home
				b, err := tc.build(cliSpec(t, tc.name, ws, opts, boxed))
				if err != nil {
					t.Fatal(err)
				}
				res, _ := b.Call(t.Context(), purser.CallRequest{TaskID: "t1", Model: "m", Prompt: "hi", Workspace: ws}, func(budget.UsageEvent) {})
				env := readJSON[map[string]string](t, filepath.Join(ws, "env.json"))
				for k, v := range env {
					if strings.Contains(v, realCLIKey) || strings.Contains(v, "sk-other-secret") {
						t.Errorf("the CLI's $%s holds a real key", k)
					}
				}
				token := env[tc.varKey]
				if !strings.HasPrefix(token, "purser-") {
					t.Fatalf("the CLI's $%s = %q; want the door's scoped token", tc.varKey, token)
				}
				status := readJSON[map[string]int](t, filepath.Join(ws, "status.json"))
				if status["own"] != 200 || status["guessed"] != 401 {
					t.Errorf("door answered %v; want 200 for the token, 401 for any other key", status)
				}
				seen := up.all()
				if len(seen) != 1 || seen[0] != tc.header {
					t.Errorf("the provider saw %q; want exactly [%q]", seen, tc.header)
				}
				if !strings.HasSuffix(res.Note, "key held at the door ($"+tc.varKey+")") || strings.Contains(res.Note, realCLIKey) {
					t.Errorf("the call's note %q; want the door's key named, never its value", res.Note)
				}
			})
		}
	}
}

// Claude Code's browser login (login: claude): Purser reads the access
// token from the user's ~/.claude/.credentials.json outside the CLI; the
// door holds it and sends it as Authorization: Bearer; the CLI gets only a
// token as CLAUDE_CODE_OAUTH_TOKEN, and the file is not in the box's HOME.
func TestTheDoorHoldsClaudesBrowserLogin(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Setenv("ANTHROPIC_API_KEY", "")
	const access = "sk-ant-oat01-fake-access"
	for _, boxed := range []bool{false, true} {
		t.Run(map[bool]string{false: "unboxed", true: "boxed"}[boxed], func(t *testing.T) {
			up := &keyUpstream{}
			url := up.start(t)
			home, ws := t.TempDir(), t.TempDir()
			if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o700); err != nil {
				t.Fatal(err)
			}
			creds := `{"claudeAiOauth":{"accessToken":"` + access + `","refreshToken":"sk-ant-ort01-fake","expiresAt":4102444800000}}`
			if err := os.WriteFile(filepath.Join(home, ".claude", ".credentials.json"), []byte(creds), 0o600); err != nil {
				t.Fatal(err)
			}
			spec := cliSpec(t, "claude", ws, map[string]any{"KEY_CLI_API": "anthropic", "KEY_CLI_VAR": "CLAUDE_CODE_OAUTH_TOKEN",
				"ANTHROPIC_BASE_URL": url, "HOME": home, "login": "claude"}, boxed)
			b, err := claude.New(spec)
			if err != nil {
				t.Fatal(err)
			}
			line := b.DoorKey()
			if !strings.Contains(line, filepath.Join(home, ".claude", ".credentials.json")) || strings.Contains(line, access) {
				t.Errorf("DoorKey() = %q; want the file named, never the token", line)
			}
			_, _ = b.Call(t.Context(), purser.CallRequest{TaskID: "t1", Model: "m", Prompt: "hi", Workspace: ws}, func(budget.UsageEvent) {})
			env := readJSON[map[string]string](t, filepath.Join(ws, "env.json"))
			if tok := env["CLAUDE_CODE_OAUTH_TOKEN"]; !strings.HasPrefix(tok, "purser-") {
				t.Fatalf("the CLI's $CLAUDE_CODE_OAUTH_TOKEN = %q; want the door's token", tok)
			}
			for k, v := range env {
				if strings.Contains(v, "sk-ant-o") {
					t.Errorf("the CLI's $%s holds the login's token", k)
				}
			}
			if seen := up.all(); len(seen) != 1 || seen[0] != "Authorization: Bearer "+access {
				t.Errorf("the provider saw %q; want the login's token as Bearer", seen)
			}
			if boxed {
				boxHome := env["HOME"]
				if boxHome == home {
					t.Fatalf("boxed, the CLI's HOME is the user's")
				}
				if _, err := os.Stat(filepath.Join(boxHome, ".claude", ".credentials.json")); err == nil {
					t.Errorf("the login file was copied into the box's HOME")
				}
			}
		})
	}
}

// Where the door cannot stand in front of the CLI (wireMeter: false;
// Bedrock, Vertex; a built-in Codex provider) a boxed call whose CLI would
// need Purser's key is refused, naming why, before anything runs; unboxed,
// the CLI keeps its own key and check says so.
func TestABoxedCLITheDoorCannotFrontIsRefusedItsKey(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Setenv("ANTHROPIC_API_KEY", realCLIKey)
	for _, tc := range []struct {
		name string
		opts map[string]any
		why  string
	}{
		{"wireMeter false", map[string]any{"wireMeter": false}, "wireMeter: false"},
		{"bedrock", map[string]any{"CLAUDE_CODE_USE_BEDROCK": "1"}, "CLAUDE_CODE_USE_BEDROCK is set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			opts := map[string]any{"KEY_CLI_API": "anthropic", "KEY_CLI_VAR": "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "HOME": t.TempDir()}
			for k, v := range tc.opts {
				opts[k] = v
			}
			unboxed, err := claude.New(cliSpec(t, "claude", ws, cloneMap(opts), false))
			if err != nil {
				t.Fatal(err)
			}
			if l := unboxed.DoorKey(); !strings.Contains(l, "the CLI holds its own key") || !strings.Contains(l, tc.why) {
				t.Errorf("unboxed DoorKey() = %q", l)
			}
			b, err := claude.New(cliSpec(t, "claude", ws, opts, true))
			if err != nil {
				t.Fatal(err)
			}
			if l := b.DoorKey(); !strings.Contains(l, "refused") {
				t.Errorf("boxed DoorKey() = %q; want the refusal said", l)
			}
			_, err = b.Call(t.Context(), purser.CallRequest{TaskID: "t1", Model: "m", Prompt: "hi", Workspace: ws}, func(budget.UsageEvent) {})
			if !errors.Is(err, proc.ErrKeyWouldEnterBox) || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "$ANTHROPIC_API_KEY") || strings.Contains(err.Error(), realCLIKey) {
				t.Fatalf("err = %v; want ErrKeyWouldEnterBox naming %q and the key's name", err, tc.why)
			}
			if _, err := os.Stat(filepath.Join(ws, "env.json")); err == nil {
				t.Errorf("the CLI ran")
			}
		})
	}
}

func cloneMap(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}
