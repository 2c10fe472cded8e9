package replay

import (
	"context"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// FromStore turns Purser's own history into runs: one per task, one call per
// ledger call, resolved when the task is DONE (unlabelled while it could
// still finish).
func FromStore(ctx context.Context, s interface {
	purser.TaskReader
	purser.LedgerReader
}) ([]Run, error) {
	tasks, err := s.Tasks(ctx)
	if err != nil {
		return nil, err
	}
	var runs []Run
	for _, t := range tasks {
		entries, err := s.Usage(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		run := Run{InstanceID: t.ID, System: "purser", WallTime: t.Elapsed}
		switch t.State {
		case purser.StateDone:
			run.Resolved = ptr(true)
		case purser.StateBlocked, purser.StateFailed:
			run.Resolved = ptr(false)
		}
		index := map[string]int{}
		for _, e := range entries {
			if e.CallID == "" {
				continue
			}
			i, ok := index[e.CallID]
			if !ok {
				i = len(run.Calls)
				index[e.CallID] = i
				run.Calls = append(run.Calls, Call{Model: e.Event.Model, At: e.At})
			}
			c := &run.Calls[i]
			c.InputTokens += e.Event.InputTokens
			c.OutputTokens += e.Event.OutputTokens
			c.CacheReadTokens += e.Event.CacheReadTokens
			c.CacheWriteTokens += e.Event.CacheWriteTokens
			c.ReasoningTokens += e.Event.ReasoningTokens
			if src := e.Event.CostSource; src == budget.CostReported || src == budget.CostEstimated {
				if c.CostUSD == nil {
					c.CostUSD = new(budget.USD)
				}
				*c.CostUSD += e.Event.USD
			}
		}
		if len(run.Calls) > 0 {
			run.Model = run.Calls[0].Model
		}
		runs = append(runs, run)
	}
	return runs, nil
}
