package claude_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/backend/internal/fixturetest"
)

// Issue 11, item 1: a dead call's spend is recovered from its session
// transcript on resume, the file recorded or located.
func TestRecoverSpendFromTheTranscript(t *testing.T) {
	fixturetest.RecoverSpend(t, fixturetest.SessionFile{
		Fixture: "sigterm.after-tool-turn.transcript.jsonl",
		Place: func(_ testing.TB, home string, n int) string {
			return filepath.Join(home, ".claude", "projects", "-scratch-runs-claude-work-sig2", fmt.Sprintf("e99d4a56-6b7a-4b12-a7be-78711d1e59b%d.jsonl", n))
		},
		Workspace: "/scratch/runs/claude/work/sig2", Started: time.Date(2026, 11, 22, 2, 38, 20, 196e6, time.UTC), Tokens: 5560,
	}, func(t testing.TB, home string) purser.SpendRecoverer {
		b, err := claude.New(purser.BackendSpec{Type: "claude", Options: map[string]any{"command": "/bin/sh", "env": map[string]any{"HOME": home}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
