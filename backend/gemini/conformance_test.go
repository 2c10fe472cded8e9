package gemini_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/backend/gemini"
)

func TestMain(m *testing.M) { backendtest.Main(m, geminiAgent{}) }

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: backendtest.AgentCLI("gemini", gemini.New, map[string]string{"HOME": "home"}),
		Replays: []backendtest.Replay{
			// The router (50 in, 3 out) and two agent calls (11000 in, 8500 cached, 65 out, 20 thoughts).
			{File: backendtest.Testdata(t, "tool.yolo-shell.stream-json.stdout.jsonl"), Want: backendtest.Usage{Input: 11_050, CacheRead: 8_500, Output: 88}},
		},
		Unsupported: map[backendtest.Capability]string{
			backendtest.OutputCap:  "gemini -p takes no cap on a call's output: the engine's hard cap bounds it",
			backendtest.USDFence:   "Gemini CLI has no spending fence of its own: the engine's hard cap stops it",
			backendtest.ReportsUSD: "Gemini CLI reports tokens, never dollars",
		},
	})
}

// geminiAgent writes `gemini -p --output-format stream-json` as Gemini CLI
// 0.61 does (see the fixtures in testdata): an init line with the session
// id; each model message's tokens in the chat file under ~/.gemini/tmp as it
// happens, the text on stdout; each model's totals in the result line.
type geminiAgent struct{}

func session() string { return fmt.Sprintf("conformance-session-%d", os.Getpid()) }

func chatFile() string {
	return filepath.Join(os.Getenv("HOME"), ".gemini", "tmp", "conformance-project", "chats", "session-2026-01-02T03-04-"+session()+".jsonl")
}

// told is what Gemini can tell: tokens, no cache writes, no dollars.
func told(u backendtest.Usage) backendtest.Usage {
	u.USD, u.CacheWrite = 0, 0
	return u
}

func (geminiAgent) Begin(a *backendtest.Agent) {
	if err := os.MkdirAll(filepath.Dir(chatFile()), 0o700); err != nil {
		a.Stderr(err.Error())
	}
	a.Append(chatFile(), backendtest.JSON(map[string]any{"sessionId": session(), "projectHash": "conformance-project", "kind": "main"}), backendtest.Usage{})
	a.Print(backendtest.JSON(map[string]any{"type": "init", "session_id": session(), "model": "auto"}), backendtest.Usage{})
}

func (geminiAgent) Reply(a *backendtest.Agent, i int, prev, u backendtest.Usage) {
	a.Append(chatFile(), backendtest.JSON(map[string]any{"id": fmt.Sprintf("conformance-msg-%d", i), "type": "gemini", "content": a.Text(i), "model": a.Script.Model,
		"tokens": map[string]any{"input": u.Input, "output": u.Output, "cached": u.CacheRead, "thoughts": 0, "tool": 0, "total": u.Tokens()}}), told(prev.Plus(u)))
	a.Print(backendtest.JSON(map[string]any{"type": "message", "role": "assistant", "content": a.Text(i), "delta": true}), backendtest.Usage{})
}

func geminiResult(a *backendtest.Agent, total backendtest.Usage, status string, failure map[string]any) []byte {
	r := map[string]any{"type": "result", "status": status, "stats": map[string]any{"total_tokens": total.Tokens(), "input_tokens": total.Input,
		"output_tokens": total.Output, "cached": total.CacheRead, "models": map[string]any{a.Script.Model: map[string]any{
			"total_tokens": total.Tokens(), "input_tokens": total.Input, "output_tokens": total.Output, "cached": total.CacheRead}}}}
	if failure != nil {
		r["error"] = failure
	}
	return backendtest.JSON(r)
}

func (geminiAgent) End(a *backendtest.Agent, total backendtest.Usage) {
	a.Print(geminiResult(a, total, "success", nil), told(total))
}

func (geminiAgent) Fail(a *backendtest.Agent, msg string, total backendtest.Usage) {
	a.Print(geminiResult(a, total, "error", map[string]any{"type": "api", "message": "[API Error: " + msg + "]"}), told(total))
	a.ExitCode = 1
}
