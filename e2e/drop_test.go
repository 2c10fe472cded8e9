package e2e_test

import "testing"

// goalDrop is goalDone with the first agent reply cut after its first SSE
// event (MOCK_DROP_1): for Claude, after message_start, which carries the
// request's input usage.
const goalDrop = "Create mock_out.txt. MOCK_TOOL MOCK_DROP_1"

// Issue 22, item 10: Claude Code retries a dropped stream without streaming
// and follows the retry with a message_delta naming no message. The ledger
// holds what the provider delivered — the two replies, 11,465 tokens, as
// the wire meter and Claude Code's own result count them — not the dropped
// stream's input on top of them (16,966 tokens were booked).
func TestDroppedStreamClaude(t *testing.T) {
	runCLIScenarios(t, claudeAgainstMock, []cliScenario{
		{"drop once", scenario{name: "claude-drop", goal: goalDrop, budget: budgetDone,
			wantExit: 0, wantState: "DONE", wantTok: 11465, wantUSD: 0.012525}},
	})
}
