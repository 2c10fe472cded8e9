package gemini_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/gemini"
	"github.com/purser-dev/purser/backend/internal/fixturetest"
)

// Issue 11, item 1: a dead call's spend is recovered from its chat file on
// resume, the file recorded or located.
func TestRecoverSpendFromTheChatFile(t *testing.T) {
	ws := "/scratch/runs/gemini/work/sig"
	fixturetest.RecoverSpend(t, fixturetest.SessionFile{
		Fixture: "sigterm.after-tool-turn.no-relaunch.chat-session.jsonl",
		Place: func(t testing.TB, home string, n int) string {
			dir := filepath.Join(home, ".gemini", "tmp", "sig")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, ".project_root"), []byte(ws), 0o644); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "chats", fmt.Sprintf("session-2026-11-22T02-43-a7abe09%d.jsonl", n))
		},
		Workspace: ws, Started: time.Date(2026, 11, 22, 2, 43, 33, 387e6, time.UTC), Tokens: 5280,
	}, func(t testing.TB, home string) purser.SpendRecoverer {
		b, err := gemini.New(purser.BackendSpec{Type: "gemini", Options: map[string]any{"command": "/bin/sh", "env": map[string]any{"HOME": home}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
