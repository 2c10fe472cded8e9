package codex_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/backend/codex"
)

func TestMain(m *testing.M) { backendtest.Main(m, codexAgent{}) }

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: backendtest.AgentCLI("codex", codex.New, map[string]string{"HOME": "home", "CODEX_HOME": "codex-home"}),
		Replays: []backendtest.Replay{
			// Two model calls, one turn: 11000 in (8500 cached), 65 out (20 of them reasoning).
			{File: backendtest.Testdata(t, "tool.workspace-write.jsonl.stdout.jsonl"), Want: backendtest.Usage{Input: 11_000, CacheRead: 8_500, Output: 65}},
		},
		Unsupported: map[backendtest.Capability]string{
			backendtest.OutputCap:  "codex exec takes no cap on a call's output: the engine's hard cap bounds it",
			backendtest.USDFence:   "Codex has no spending fence of its own: the engine's hard cap stops it",
			backendtest.ReportsUSD: "Codex reports tokens, never dollars",
		},
	})
}

// codexAgent writes `codex exec --json` as Codex CLI 0.169 does (see the
// fixtures in testdata): the thread's id first; after every model call a
// running total in the rollout file under $CODEX_HOME/sessions, and the
// agent's message on stdout; the turn's total in turn.completed.
type codexAgent struct{}

func thread() string { return fmt.Sprintf("conformance-thread-%d", os.Getpid()) }

func rollout() string {
	return filepath.Join(os.Getenv("CODEX_HOME"), "sessions", "2026", "01", "02", "rollout-2026-01-02T03-04-05-"+thread()+".jsonl")
}

func codexUsage(u backendtest.Usage) map[string]any {
	return map[string]any{"input_tokens": u.Input, "cached_input_tokens": u.CacheRead, "cache_write_input_tokens": u.CacheWrite,
		"output_tokens": u.Output, "reasoning_output_tokens": 0, "total_tokens": u.Tokens()}
}

func tokensOnly(u backendtest.Usage) backendtest.Usage {
	u.USD = 0
	return u
}

func (codexAgent) Begin(a *backendtest.Agent) {
	if err := os.MkdirAll(filepath.Dir(rollout()), 0o700); err != nil {
		a.Stderr(err.Error())
	}
	a.Append(rollout(), backendtest.JSON(map[string]any{"type": "session_meta", "payload": map[string]any{"id": thread(), "originator": "codex_exec"}}), backendtest.Usage{})
	a.Print(backendtest.JSON(map[string]any{"type": "thread.started", "thread_id": thread()}), backendtest.Usage{})
	a.Print(backendtest.JSON(map[string]any{"type": "turn.started"}), backendtest.Usage{})
}

func (codexAgent) Reply(a *backendtest.Agent, i int, prev, u backendtest.Usage) {
	total := tokensOnly(prev.Plus(u))
	a.Append(rollout(), backendtest.JSON(map[string]any{"type": "event_msg", "payload": map[string]any{"type": "token_count",
		"info": map[string]any{"total_token_usage": codexUsage(total), "last_token_usage": codexUsage(u)}}}), total)
	a.Print(backendtest.JSON(map[string]any{"type": "item.completed", "item": map[string]any{"id": fmt.Sprintf("item_%d", i), "type": "agent_message", "text": a.Text(i)}}),
		backendtest.Usage{})
}

func (codexAgent) End(a *backendtest.Agent, total backendtest.Usage) {
	a.Print(backendtest.JSON(map[string]any{"type": "turn.completed", "usage": codexUsage(total)}), tokensOnly(total))
}

func (codexAgent) Fail(a *backendtest.Agent, msg string, total backendtest.Usage) {
	a.Print(backendtest.JSON(map[string]any{"type": "error", "message": msg}), backendtest.Usage{})
	a.Print(backendtest.JSON(map[string]any{"type": "turn.failed", "error": map[string]any{"message": msg}}), backendtest.Usage{})
	a.ExitCode = 1
}
