package claude_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/backend/claude"
	"github.com/purser-dev/purser/budget"
)

func TestMain(m *testing.M) { backendtest.Main(m, claudeAgent{}) }

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: backendtest.AgentCLI("claude", claude.New, map[string]string{"HOME": "home"}),
		Replays: []backendtest.Replay{
			// Two API calls (1200+300+4000 in, 60 out; 1300+100+4500 in, 5 out), $0.020875 reported.
			{File: backendtest.Testdata(t, "tool.stream-json-partial.stdout.jsonl"), Want: backendtest.Usage{Input: 11_400, CacheRead: 8_500, CacheWrite: 400, Output: 65, USD: 20_875_000}},
			// Without partial messages the stream shows 1 output token per message: the result fills in the rest.
			{File: backendtest.Testdata(t, "tool.stream-json.stdout.jsonl"), Want: backendtest.Usage{Input: 11_400, CacheRead: 8_500, CacheWrite: 400, Output: 65, USD: 20_875_000}},
			// Stopped by its own --max-budget-usd fence, after overshooting it.
			{File: backendtest.Testdata(t, "tool.max-budget-usd.stream-json.stdout.jsonl"), Want: backendtest.Usage{Input: 5_500, CacheRead: 4_000, CacheWrite: 300, Output: 60, USD: 11_375_000}, Failed: true},
			// 529 twice, then a success: the retries cost nothing.
			{File: backendtest.Testdata(t, "err.529x2-then-ok.stream-json.stdout.jsonl"), Want: backendtest.Usage{Input: 5_900, CacheRead: 4_500, CacheWrite: 100, Output: 5, USD: 9_500_000}},
		},
		Unsupported: map[backendtest.Capability]string{
			backendtest.OutputCap: "Claude Code takes no cap on a call's output (CLAUDE_CODE_MAX_OUTPUT_TOKENS caps each API reply, not the call): " +
				"its --max-budget-usd fence and the engine's hard cap bound it",
		},
	})
}

// claudeAgent writes `claude -p --output-format stream-json --verbose
// --include-partial-messages` as Claude Code 2.1 does (see the fixtures in
// testdata): per API message a message_start snapshot (output_tokens 1),
// the assistant event repeating it, the final usage in message_delta, the
// message in the session transcript; then a result line with the totals
// and total_cost_usd. It stops at its --max-budget-usd fence, and on SIGINT
// writes a result with the cost so far.
type claudeAgent struct{}

func session() string { return fmt.Sprintf("conformance-session-%d", os.Getpid()) }

func transcript() string {
	return filepath.Join(os.Getenv("HOME"), ".claude", "projects", "-conformance-ws", session()+".jsonl")
}

// anthropic is usage in Anthropic's shape: input without the cache tokens.
func anthropic(u backendtest.Usage) map[string]any {
	return map[string]any{"input_tokens": u.Input - u.CacheRead - u.CacheWrite, "cache_read_input_tokens": u.CacheRead,
		"cache_creation_input_tokens": u.CacheWrite, "output_tokens": u.Output}
}

func streamEvent(ev map[string]any) []byte {
	return backendtest.JSON(map[string]any{"type": "stream_event", "event": ev, "session_id": session(), "parent_tool_use_id": nil})
}

func tokensOnly(u backendtest.Usage) backendtest.Usage {
	u.USD = 0 // the stream tells tokens; only the result line tells dollars
	return u
}

func (claudeAgent) Begin(a *backendtest.Agent) {
	if v := a.Arg("--max-budget-usd"); v != "" {
		a.USDFence, _ = budget.ParseUSD(v)
	}
	if err := os.MkdirAll(filepath.Dir(transcript()), 0o700); err != nil {
		a.Stderr(err.Error())
	}
	a.Print(backendtest.JSON(map[string]any{"type": "system", "subtype": "init", "session_id": session(), "model": a.Script.Model}), backendtest.Usage{})
}

func (claudeAgent) Reply(a *backendtest.Agent, i int, prev, u backendtest.Usage) {
	id := fmt.Sprintf("msg_conformance_%d", i)
	start := u
	start.Output = min(u.Output, 1)
	message := func(usage backendtest.Usage, content []any) map[string]any {
		return map[string]any{"id": id, "type": "message", "role": "assistant", "model": a.Script.Model, "content": content, "usage": anthropic(usage)}
	}
	a.Print(streamEvent(map[string]any{"type": "message_start", "message": message(start, []any{})}), tokensOnly(prev.Plus(start)))
	a.Print(streamEvent(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": a.Text(i)}}), backendtest.Usage{})
	a.Print(backendtest.JSON(map[string]any{"type": "assistant", "message": message(start, []any{map[string]any{"type": "text", "text": a.Text(i)}}),
		"session_id": session()}), backendtest.Usage{})
	a.Append(transcript(), backendtest.JSON(map[string]any{"type": "assistant", "sessionId": session(), "message": message(u, []any{})}), tokensOnly(prev.Plus(u)))
	a.Print(streamEvent(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"}, "usage": anthropic(u)}), tokensOnly(prev.Plus(u)))
	a.Print(streamEvent(map[string]any{"type": "message_stop"}), backendtest.Usage{})
}

func result(a *backendtest.Agent, total backendtest.Usage, fields map[string]any) []byte {
	usage := anthropic(total)
	r := map[string]any{"type": "result", "subtype": "success", "is_error": false, "api_error_status": nil, "num_turns": a.Script.Replies,
		"result": "done", "session_id": session(), "total_cost_usd": total.USD,
		"modelUsage": map[string]any{a.Script.Model + "[1m]": map[string]any{"inputTokens": usage["input_tokens"], "outputTokens": total.Output,
			"cacheReadInputTokens": total.CacheRead, "cacheCreationInputTokens": total.CacheWrite, "costUSD": total.USD}}}
	for k, v := range fields {
		r[k] = v
	}
	return backendtest.JSON(r)
}

func (claudeAgent) End(a *backendtest.Agent, total backendtest.Usage) {
	a.Print(result(a, total, nil), total)
}

func (claudeAgent) Fail(a *backendtest.Agent, msg string, total backendtest.Usage) {
	a.Print(result(a, total, map[string]any{"is_error": true, "api_error_status": 401, "result": "API Error: 401 " + msg}), total)
	a.ExitCode = 1
}

func (claudeAgent) Fenced(a *backendtest.Agent, total backendtest.Usage) {
	a.Print(result(a, total, map[string]any{"subtype": "error_max_budget_usd", "is_error": true,
		"errors": []string{"Reached maximum budget ($" + a.USDFence.Decimal() + ")"}}), total)
	a.ExitCode = 1
}

func (claudeAgent) Interrupted(a *backendtest.Agent, total backendtest.Usage) {
	a.Print(result(a, total, map[string]any{"subtype": "error_during_execution", "is_error": true, "terminal_reason": "aborted_streaming"}), total)
}
