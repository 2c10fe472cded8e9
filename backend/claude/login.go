package claude

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/proc"
	"github.com/purser-dev/purser/gateway"
)

// LoginClaude is the login: option's value for Claude Code's browser login
// (a Pro or Max subscription): the OAuth access token in the user's
// ~/.claude/.credentials.json ($CLAUDE_CONFIG_DIR/.credentials.json when
// that is set). Purser reads it outside the CLI, when each call starts;
// the door holds it and sends it upstream as Authorization: Bearer; the
// CLI, boxed or not, gets only the call's scoped token as
// CLAUDE_CODE_OAUTH_TOKEN. The file never enters the box, and the token is
// never refreshed by Purser: an unboxed claude refreshes the file itself.
const LoginClaude = "claude"

// loginField is where the access token is in the credentials file.
const loginField = "claudeAiOauth.accessToken"

// keys are where Claude Code reads its credentials, in its own order of
// precedence (ANTHROPIC_AUTH_TOKEN, then ANTHROPIC_API_KEY, then
// CLAUDE_CODE_OAUTH_TOKEN), with the declared login before them.
func (o Options) keys() proc.Credentials {
	c := proc.Credentials{
		Names:     []string{"ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"},
		Bearer:    []string{"ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"},
		LoginName: "CLAUDE_CODE_OAUTH_TOKEN",
	}
	if o.Login == LoginClaude {
		c.Login = gateway.Key{File: o.loginFile(), Field: loginField, Bearer: true}
	}
	return c
}

// loginFile is Claude Code's credentials file as the user's own claude
// keeps it.
func (o Options) loginFile() string {
	if d := o.Getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return filepath.Join(d, ".credentials.json")
	}
	return filepath.Join(o.Home(), ".claude", ".credentials.json")
}

// Check finds the CLI and, with login: claude, the login's file.
func (o Options) Check(dir string) error {
	if err := o.CLIOptions.Check(dir); err != nil {
		return err
	}
	if o.Login != LoginClaude {
		return nil
	}
	if fi, err := os.Stat(o.loginFile()); err != nil || !fi.Mode().IsRegular() {
		return &backend.OptionError{Option: "login", Msg: fmt.Sprintf("no browser login at %s (log in with claude first, then /login)", o.loginFile()), Err: err}
	}
	return nil
}

// LoginNote says, for a login whose access token has expired, how to
// renew it ("" when none is declared, or it is valid): Purser does not
// refresh it, and the provider would refuse it.
func (o Options) LoginNote(now time.Time) string {
	if o.Login != LoginClaude {
		return ""
	}
	b, err := os.ReadFile(o.loginFile())
	if err != nil {
		return ""
	}
	var v struct {
		OAuth struct {
			ExpiresAt int64 `json:"expiresAt"`
		} `json:"claudeAiOauth"`
	}
	if json.Unmarshal(b, &v) != nil || v.OAuth.ExpiresAt == 0 {
		return ""
	}
	if at := time.UnixMilli(v.OAuth.ExpiresAt); at.Before(now) {
		return fmt.Sprintf("the login's access token in %s expired at %s: run claude once outside Purser to refresh it", o.loginFile(), at.UTC().Format(time.RFC3339))
	}
	return ""
}
