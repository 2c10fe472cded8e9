package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser/alert"
	"github.com/purser-dev/purser/config"
)

func writeProject(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "purser.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAlertsSection(t *testing.T) {
	p := writeProject(t, `alerts:
  flush: 2s
  maxAttempts: 3
  webhooks:
    - name: ops
      url: https://alerts.example.com/purser
    - name: chat
      urlEnv: PURSER_TEST_SLACK_URL
      format: slack
      events: [hard, blocked]
`)
	proj, err := config.LoadProject(p)
	if err != nil {
		t.Fatal(err)
	}
	if !proj.Alerts.Enabled() {
		t.Fatal("alerts not enabled")
	}
	t.Setenv("PURSER_TEST_SLACK_URL", "https://hooks.example.com/services/T0/B0/x")
	cfg, err := proj.Alerts.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Flush != 2*time.Second || cfg.MaxAttempts != 3 || len(cfg.Webhooks) != 2 {
		t.Fatalf("config = %+v", cfg)
	}
	chat := cfg.Webhooks[1]
	if chat.Name != "chat" || chat.Format != alert.FormatSlack || chat.URL != "https://hooks.example.com/services/T0/B0/x" || len(chat.Events) != 2 || chat.Events[0] != alert.Hard {
		t.Fatalf("chat webhook = %+v", chat)
	}
	if cfg.Webhooks[0].Format != alert.FormatJSON || len(cfg.Webhooks[0].Events) != 0 {
		t.Fatalf("ops webhook = %+v", cfg.Webhooks[0])
	}
}

func TestAlertsSectionUnsetURLEnvIsLocated(t *testing.T) {
	p := writeProject(t, "alerts:\n  webhooks:\n    - urlEnv: PURSER_TEST_UNSET_HOOK\n")
	proj, err := config.LoadProject(p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = proj.Alerts.Config()
	if err == nil || !strings.Contains(err.Error(), "purser.yaml:3:15: alerts.webhooks[0].urlEnv: $PURSER_TEST_UNSET_HOOK is not set") {
		t.Fatalf("error = %v", err)
	}
}

func TestAlertsSectionErrorsNameLineAndField(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"unknown key", "alerts:\n  webhook: []\n", `purser.yaml:2:3: unknown field "webhook" (did you mean "webhooks"?)`},
		{"unknown webhook key", "alerts:\n  webhooks:\n    - url: https://x.example\n      secret: y\n", `purser.yaml:4:7: unknown field "secret"`},
		{"no url", "alerts:\n  webhooks:\n    - name: a\n", "purser.yaml:3:11: alerts.webhooks[0].url: is required"},
		{"both urls", "alerts:\n  webhooks:\n    - {url: https://x.example, urlEnv: X}\n", "alerts.webhooks[0].url: give url or urlEnv, not both"},
		{"not http", "alerts:\n  webhooks:\n    - url: ftp://x.example/hook\n", "purser.yaml:3:12: alerts.webhooks[0].url: is not an http:// or https:// URL"},
		{"bad format", "alerts:\n  webhooks:\n    - {url: https://x.example, format: teams}\n", `alerts.webhooks[0].format: "teams": want json`},
		{"bad event", "alerts:\n  webhooks:\n    - url: https://x.example\n      events: [hard, critical]\n", `purser.yaml:4:22: alerts.webhooks[0].events[1]: "critical": want one of warning, warning_line, hard, blocked`},
		{"bad flush", "alerts:\n  flush: soon\n", `purser.yaml:2:10: alerts.flush: "soon": want a duration`},
		{"bad attempts", "alerts:\n  maxAttempts: 0\n", "alerts.maxAttempts: want 1 to 100, got 0"},
		{"duplicate name", "alerts:\n  webhooks:\n    - {name: a, url: https://x.example}\n    - {name: a, url: https://y.example}\n", `alerts.webhooks[1].name: "a" is used twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.LoadProject(writeProject(t, tt.in))
			if err == nil {
				t.Fatalf("accepted %q", tt.in)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error is %T, want *config.Error", err)
			}
		})
	}
}
