package sim_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend"
	"github.com/purser-dev/purser/backend/backendtest"
	"github.com/purser-dev/purser/backend/sim"
	"github.com/purser-dev/purser/budget"
)

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T, s backendtest.Script) purser.Backend {
			step := map[string]any{"usage": simUsage(s.Usage), "delayMs": s.Replies * int(s.Pace.Milliseconds())}
			if s.End == backendtest.EndFailure {
				step["fail"] = "fatal"
			}
			if err := os.WriteFile(filepath.Join(s.State, "sim.yaml"), backendtest.JSON(map[string]any{"steps": []any{step}}), 0o600); err != nil {
				t.Fatal(err)
			}
			// The sim is its own provider: whatever it streamed, it may
			// have streamed any part of its step.
			backendtest.RecordTold(t, s, backendtest.Usage{}, s.Usage)
			return backendtest.Build(t, sim.New, purser.BackendSpec{Type: "sim", Dir: s.State, Options: map[string]any{"script": "sim.yaml"}})
		},
		Unsupported: map[backendtest.Capability]string{
			backendtest.USDFence:     "the sim has no spending fence of its own: the engine's hard cap stops it",
			backendtest.AgentOutput:  "the sim plays a script validated when it was loaded: there is no agent output to corrupt or leak",
			backendtest.ProcessGroup: "the sim runs in-process: there is no process to stop",
		},
	})
}

func simUsage(u backendtest.Usage) backend.Usage {
	c := backend.Usage{InputTokens: u.Input, OutputTokens: u.Output, CacheReadTokens: u.CacheRead, CacheWriteTokens: u.CacheWrite}
	if u.USD > 0 {
		usd := budget.USD(u.USD)
		c.CostUSD = &usd
	}
	return c
}
