package e2e_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/purser-dev/purser/backend/backendtest"
)

// mockBilled is the input the shared mock bills a reply of each kind
// (cache included), per API: its README's fixed usage table.
var mockBilled = map[string]map[string]int64{
	"anthropic": {"tool": 1200 + 300 + 4000, "final": 1300 + 100 + 4500, "side": 50},
	"responses": {"tool": 5200, "final": 5800, "side": 50},
	"chat":      {"tool": 5200, "final": 5800, "side": 50},
	"gemini":    {"tool": 5200, "final": 5800, "side": 50},
}

// mockKind is the kind of reply the mock gave: what it did ("chat_final_stream"),
// which says the kind it settled on (a tool call it could not make for the
// agent's tools becomes "done"), else the plan's.
func mockKind(did, plan string) string {
	for _, k := range []string{"tool", "final", "side"} {
		if strings.Contains(did, "_"+k+"_") {
			return k
		}
	}
	return plan
}

// doorCount is the door's rule (gateway/count.go), replayed over a mock's
// log in the order the requests came: bytes/4 until a reply of the model
// was billed, then the highest billed rate a byte seen, plus a quarter
// (the margin no further than bytes/4).
type doorCount struct{ rate map[string]int64 }

func (d *doorCount) count(model string, n int64) (int64, bool) {
	r := d.rate[model]
	if r == 0 {
		return (n + 3) / 4, false
	}
	at := (n*r + 1_000_000 - 1) / 1_000_000
	margin := (n*r*125 + 100_000_000 - 1) / 100_000_000
	return max(at, min(margin, (n+3)/4), 16), true
}

func (d *doorCount) learn(model string, n, billed int64) {
	if r := min((billed*1_000_000+n-1)/n, 1_000_000); r > d.rate[model] {
		d.rate[model] = r
	}
}

// What the door counts of each real CLI's requests against what the mock
// bills them: bytes/4 for the first request of a model (Claude Code's is
// ~5× its bill), the learned rate after; and every request counted at the
// learned rate is counted at no less than its bill. The figures are in
// docs/wire-admission.md ("What is counted").
func TestDoorCountAgainstTheMocksBill(t *testing.T) {
	dir := clis(t)
	for _, cli := range []struct {
		name  string
		setup func(t *testing.T, dir, home, url string) (string, []string)
		want  int64
	}{{"claude", claudeAgainstMock, 11465}, {"codex", codexAgainstMock, 11065}, {"gemini", geminiAgainstMock, 11085}} {
		t.Run(cli.name, func(t *testing.T) {
			url := backendtest.StartMock(t)
			backend, env := cli.setup(t, dir, t.TempDir(), url)
			runScenario(t, scenario{name: cli.name + "-count", goal: goalDone, budget: budgetDone, backend: backend, env: env,
				wantExit: 0, wantState: "DONE", wantTok: cli.want, wantUSD: map[string]float64{"claude": 0.012525, "codex": 0.0187, "gemini": 0.0050375}[cli.name]})
			d := &doorCount{rate: map[string]int64{}}
			var rows []string
			for _, e := range mockLog[struct {
				Did       string `json:"did"`
				BodyBytes int64  `json:"body_bytes"`
				Summary   struct {
					API   string `json:"api"`
					Model string `json:"model"`
				} `json:"summary"`
				Plan struct {
					Kind string `json:"kind"`
				} `json:"plan"`
			}](t, url) {
				kind := mockKind(e.Did, e.Plan.Kind)
				billed, ok := mockBilled[e.Summary.API][kind]
				if !ok || e.BodyBytes == 0 {
					continue
				}
				model := e.Summary.Model
				if model == "" { // Gemini names it in the path
					model = e.Summary.API
				}
				counted, learned := d.count(model, e.BodyBytes)
				if learned && counted < billed {
					t.Errorf("%s %s request of %d bytes billed %d input tokens; the learned rate counted %d", model, kind, e.BodyBytes, billed, counted)
				}
				rows = append(rows, fmt.Sprintf("%s %s: %d bytes, bytes/4 %d, counted %d (learned %v), billed %d",
					model, kind, e.BodyBytes, (e.BodyBytes+3)/4, counted, learned, billed))
				d.learn(model, e.BodyBytes, billed)
			}
			t.Logf("%s:\n  %s", cli.name, strings.Join(rows, "\n  "))
		})
	}
}
