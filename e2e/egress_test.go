package e2e_test

import (
	"path/filepath"
	"testing"
)

// A box with network.allow has HTTP(S)_PROXY pointed at Purser's egress
// proxy; NO_PROXY keeps the door (127.0.0.1) direct. The three real CLIs
// honour it: each still reaches the shared mock through the door, DONE,
// the ledger exactly as without the proxy (TestBoxedCLIs).
func TestBoxedCLIsBesideTheEgressProxy(t *testing.T) {
	clis(t)
	requireBox(t)
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, dir, home, url string) (string, []string)
		sc    scenario
	}{
		{"claude", claudeAgainstMock, scenario{name: "egress-claude", wantTok: 11465, wantUSD: 0.012525}},
		{"codex", codexAgainstMock, scenario{name: "egress-codex", wantTok: 11065, wantUSD: 0.0187}},
		{"gemini", geminiAgainstMock, scenario{name: "egress-gemini", wantTok: 11085, wantUSD: 0.0050375}},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			setup := func(t *testing.T, dir, home, url string) (string, []string) {
				backend, env := c.setup(t, dir, home, url)
				return backend + "\n  sandbox: {mode: on, network: {allow: [\"registry.npmjs.org:443\"]}}", append(env, "XDG_STATE_HOME="+state)
			}
			runCLIScenarios(t, setup, []cliScenario{{"done", scenario{name: c.sc.name, goal: goalDone, budget: budgetDone,
				wantExit: 0, wantState: "DONE", wantTok: c.sc.wantTok, wantUSD: c.sc.wantUSD}}})
			if homes, _ := filepath.Glob(filepath.Join(state, "purser", "projects", "*", "boxes", "agent-"+c.sc.name, "*")); len(homes) == 0 {
				t.Fatalf("nothing in the box's HOME under %s: the CLI did not run in the box", state)
			}
		})
	}
}
