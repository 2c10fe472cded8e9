package sandbox

import "testing"

// A hostile environment keeps only the allow-list, and what is named;
// what is forbidden stays out even when named.
func TestEnvAllowList(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "TZ=UTC", "HOME=/root", "USER=root",
		"PGPASSWORD=pw", "PGHOST=db", "PURSER_DB=postgres://u:pw@db/x", "PURSER_SERVE_TOKEN=t", "DATABASE_URL=postgres://x",
		"SLACK_WEBHOOK_URL=https://hooks.slack.com/x", "purser_webhook=y", "GITHUB_TOKEN=ghs_x", "GH_TOKEN=gho_x",
		"AWS_SECRET_ACCESS_KEY=k", "ANTHROPIC_API_KEY=sk-ant", "SSH_AUTH_SOCK=/tmp/agent", "LD_PRELOAD=/tmp/x.so",
		"NOEQUALS", "=empty", "LANG=en_GB.UTF-8",
	}
	got := EnvAllowList(environ, "ANTHROPIC_API_KEY", "PURSER_SERVE_TOKEN", "PGPASSWORD", "SLACK_WEBHOOK_URL", "UNSET_NAME")
	want := map[string]string{"PATH": "/usr/bin", "LANG": "en_GB.UTF-8", "LC_ALL": "C", "TERM": "xterm", "TZ": "UTC", "ANTHROPIC_API_KEY": "sk-ant"}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if g := EnvAllowList(environ, "GITHUB_TOKEN"); g["GITHUB_TOKEN"] != "ghs_x" || g["GH_TOKEN"] != "" {
		t.Errorf("GITHUB_TOKEN named: %v", g)
	}
	for _, k := range []string{"PGUSER", "PURSER_X", "DATABASE_URL", "database_url", "MY_WEBHOOK", "Slack_Webhook_Url"} {
		if !Forbidden(k) {
			t.Errorf("Forbidden(%q) = false", k)
		}
	}
	for _, k := range []string{"PATH", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "HOOK"} {
		if Forbidden(k) {
			t.Errorf("Forbidden(%q) = true", k)
		}
	}
}
