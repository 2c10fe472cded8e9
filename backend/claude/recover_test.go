package claude_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/backend/internal/fixturetest"
	"github.com/purser-dev/purser/budget"
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

// The path recorded at the call's start is where Claude Code would write
// the transcript; one it wrote elsewhere (another directory name for the
// workspace) is found by its session id, and one it never wrote is said.
func TestRecoverSpendFindsTheTranscriptBySessionID(t *testing.T) {
	home := t.TempDir()
	data, err := os.ReadFile("testdata/sigterm.after-tool-turn.transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(home, ".claude", "projects", "-elsewhere", "e99d4a56.jsonl")
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, data, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := claude.New(purser.BackendSpec{Type: "claude", Options: map[string]any{"command": "/bin/sh", "env": map[string]any{"HOME": home}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		recorded, want string
		tokens         int64
	}{
		{filepath.Join(home, ".claude", "projects", "-ws", "e99d4a56.jsonl"), real, 5560},
		{filepath.Join(home, ".claude", "projects", "-ws", "0000.jsonl"), "", 0},
	} {
		got, err := b.RecoverSpend(context.Background(), purser.SpendQuery{Call: purser.CallRecord{ID: "c", Session: tt.recorded}, Workspace: "/ws"})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, ev := range got.Usage {
			n += ev.Tokens()
		}
		if got.Session != tt.want || n != tt.tokens {
			t.Fatalf("recorded %s: read %q (%d tokens), want %q (%d); note %q", tt.recorded, got.Session, n, tt.want, tt.tokens, got.Note)
		}
		if tt.want == "" && !strings.Contains(got.Note, "never written") {
			t.Fatalf("note %q does not say the transcript was never written", got.Note)
		}
	}
}

// What the ledger holds under another name of the model (Claude Code's
// result says "claude-opus-4-8[1m]" where its stream says "claude-opus-4-8")
// is not recovered again from the transcript.
func TestRecoverSpendComparesAcrossModelNames(t *testing.T) {
	home := t.TempDir()
	file := filepath.Join(home, "t.jsonl")
	data, err := os.ReadFile("testdata/sigterm.after-tool-turn.transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := claude.New(purser.BackendSpec{Type: "claude", Options: map[string]any{"command": "/bin/sh", "env": map[string]any{"HOME": home}}})
	if err != nil {
		t.Fatal(err)
	}
	// The stream's 5,501 tokens under the stream's name, the reconciliation's
	// 59 under the result's.
	recorded := []budget.UsageEvent{
		{InputTokens: 5500, CacheReadTokens: 4000, CacheWriteTokens: 300, OutputTokens: 1, Model: "claude-opus-4-8"},
		{OutputTokens: 59, Model: "claude-opus-4-8[1m]"},
	}
	got, err := b.RecoverSpend(context.Background(), purser.SpendQuery{Call: purser.CallRecord{ID: "c", Session: file}, Recorded: recorded})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Usage) != 0 {
		t.Fatalf("recovered %+v again", got.Usage)
	}
}
