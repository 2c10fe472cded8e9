package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// settlingBackend streams tokens without dollars, then — as Claude Code does
// with its total_cost_usd — settles a total reported at the end against
// what the engine priced the stream at, through CallRequest.Price.
type settlingBackend struct {
	reported budget.USD
	stream   []budget.UsageEvent
}

func (b settlingBackend) Call(_ context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	var priced budget.USD
	for _, ev := range b.stream {
		report(ev)
		if p := req.Price(ev); p.CostSource == budget.CostEstimated {
			priced += p.USD
		}
	}
	report(budget.UsageEvent{USD: b.reported - priced, CostSource: budget.CostReported})
	return purser.CallResult{}, os.WriteFile(filepath.Join(req.Workspace, "src", "fixed"), nil, 0o644)
}

// The engine is the one place usage is priced: a backend's unpriced tokens
// are estimated as they are recorded, and CallRequest.Price is that very
// pricing, so a total reported at the end lands in the ledger exactly.
func TestBackendSettlesAReportedTotalAgainstTheEnginesPricing(t *testing.T) {
	f := newFixture(t, "steps: []\n")
	// Odd token counts, so that per-event rounding to the nano-dollar shows.
	b := settlingBackend{reported: budget.USD(987_654_321), stream: []budget.UsageEvent{
		{InputTokens: 1_001, OutputTokens: 7},
		{InputTokens: 333, CacheReadTokens: 111, OutputTokens: 3},
		{OutputTokens: 1},
	}}
	f.cfg.Backends = func(purser.BackendSpec) (purser.Backend, error) { return b, nil }
	f.task.Backend.Models = map[string]string{"standard": "claude-sonnet-4-5"}
	if err := f.run(); err != nil {
		t.Fatal(err)
	}
	usage, err := f.store.Usage(context.Background(), f.task.ID)
	must(t, err)
	var tot budget.Totals
	estimated := 0
	for _, e := range usage {
		tot.Add(e.Event)
		if e.Event.CostSource == budget.CostEstimated {
			estimated++
		}
	}
	if estimated != len(b.stream) || tot.USD != b.reported || tot.Tokens != 1_345 {
		t.Fatalf("ledger %s over %d tokens with %d estimated events; want exactly the reported %s, 1345 tokens, %d estimated",
			tot.USD, tot.Tokens, estimated, b.reported, len(b.stream))
	}
}
