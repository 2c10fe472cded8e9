package codex_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/codex"
	"github.com/purser-dev/purser/backend/internal/fixturetest"
)

// Issue 11, item 1: a dead call's spend is recovered from its rollout file
// on resume, the file recorded or located.
func TestRecoverSpendFromTheRollout(t *testing.T) {
	fixturetest.RecoverSpend(t, fixturetest.SessionFile{
		Fixture: "sigterm.after-tool-turn.rollout.jsonl",
		Place: func(_ testing.TB, home string, n int) string {
			return filepath.Join(home, "sessions", "2026", "11", "22", fmt.Sprintf("rollout-2026-11-22T02-37-34-01a2011d-%d.jsonl", n))
		},
		Workspace: "/scratch/runs/codex/work/sig2", Started: time.Date(2026, 11, 22, 2, 37, 34, 938e6, time.UTC), Tokens: 5260,
	}, func(t testing.TB, home string) purser.SpendRecoverer {
		b, err := codex.New(purser.BackendSpec{Type: "codex", Options: map[string]any{"command": "/bin/sh", "env": map[string]any{"CODEX_HOME": home}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
