package e2e_test

import (
	"os"
	"testing"
)

// goalDrop is goalDone with the first agent reply cut after its first SSE
// event (MOCK_DROP_1): for Claude after message_start, for Gemini after a
// first chunk; each names the request's input. The CLI retries the request.
const goalDrop = "Create mock_out.txt. MOCK_TOOL MOCK_DROP_1"

// Issue 22, item 10, decided: a dropped stream's input was billed when its
// provider reported it — Anthropic's message_start, Gemini's first chunk —
// and is booked once, beside the retry, a request of its own; a stream cut
// before its provider reported anything (Codex's, after response.created)
// books nothing. These pin what the real CLIs make of MOCK_DROP_1 against
// the shared mock: the mock delivered 11,465 (Claude) and 11,085 (Gemini)
// tokens in whole replies, and reported 5,501 and 5,200 more at the start of
// the dropped one.

// Claude Code retries without streaming and follows the retry with a
// message_delta naming no message, which is the retry's: 5,501 + 5,560 +
// 5,905 tokens, Sonnet 4.5 list prices, each once.
func TestDroppedStreamClaude(t *testing.T) {
	runCLIScenarios(t, claudeAgainstMock, []cliScenario{
		{"drop once", scenario{name: "claude-drop", goal: goalDrop, budget: budgetDone,
			wantExit: 0, wantState: "DONE", wantTok: 16966, wantUSD: 0.018465}},
	})
}

// Gemini CLI's own retries are off (as root: see TestCheckSaysGeminiRetriesStayOn
// for anyone else), so the dropped request ends the first call, whose
// result counts the prompt its first chunk reported (5,200), and Purser's
// retry delivers the 11,085.
func TestDroppedStreamGemini(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("Gemini CLI's own retries stay on for a user who is not root: the call is not failed and retried by Purser")
	}
	runCLIScenarios(t, geminiAgainstMock, []cliScenario{
		{"drop once", scenario{name: "gemini-drop", goal: goalDrop, budget: budgetDone,
			wantExit: 0, wantState: "DONE", wantTok: 16285, wantUSD: 0.0115375}},
	})
}
