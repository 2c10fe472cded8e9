package claude

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser/backend/proc"
)

// login: claude names the user's credentials file (CLAUDE_CONFIG_DIR's
// when set), says when its access token has expired, and takes no other
// value.
func TestLoginClaude(t *testing.T) {
	home := t.TempDir()
	o := defaultOptions()
	o.Login = LoginClaude
	o.Env = map[string]string{"HOME": home}
	file := filepath.Join(home, ".claude", ".credentials.json")
	if got := o.keys().Login; got.File != file || got.Field != "claudeAiOauth.accessToken" || !got.Bearer {
		t.Errorf("login key %+v; want %s's access token, as Bearer", got, file)
	}
	o.Env["CLAUDE_CONFIG_DIR"] = "/cfg"
	if got := o.keys().Login.File; got != "/cfg/.credentials.json" {
		t.Errorf("with CLAUDE_CONFIG_DIR, login file %s", got)
	}
	delete(o.Env, "CLAUDE_CONFIG_DIR")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	expires := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	creds := `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-secret","expiresAt":` + strconv.FormatInt(expires.UnixMilli(), 10) + `}}`
	if err := os.WriteFile(file, []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := o.LoginNote(expires.Add(-time.Hour)); n != "" {
		t.Errorf("a valid login: note %q", n)
	}
	n := o.LoginNote(expires.Add(time.Hour))
	if !strings.Contains(n, "expired at 2026-01-02T03:04:05Z") || !strings.Contains(n, file) || strings.Contains(n, "secret") {
		t.Errorf("an expired login: note %q", n)
	}
	if d := (proc.CLIOptions{Env: o.Env}).DoorKey(o.keys()); d.Name != "CLAUDE_CODE_OAUTH_TOKEN" || d.Key.File != file {
		t.Errorf("DoorKey %+v; want the login held, the token as CLAUDE_CODE_OAUTH_TOKEN", d)
	}
	o.Login = "browser"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), `login: "browser": want "claude"`) {
		t.Errorf("login: browser: %v", err)
	}
}
