package report

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// AgentSpendJSON is what one agent of a task spent: the main agent, or one
// of its sub-agents by the name its CLI (or Purser's door) gave it.
type AgentSpendJSON struct {
	Agent  string     `json:"agent"`
	Calls  int        `json:"calls"`
	Tokens int64      `json:"tokens"`
	USD    budget.USD `json:"usd"`
	// USDSource labels USD: reported, estimated, partial or unknown.
	USDSource string `json:"usdSource"`
}

// readAgentSpend reads what each agent of a task spent, from a store that
// keeps usage per agent; nil when only the main agent spent any.
func readAgentSpend(ctx context.Context, store ExplainStore, id string) ([]*group, error) {
	s, ok := store.(interface {
		CallUsage(ctx context.Context, taskID string) ([]purser.CallUsage, error)
	})
	if !ok {
		return nil, nil
	}
	usage, err := s.CallUsage(ctx, id)
	if err != nil {
		return nil, err
	}
	groups := groupUsage(usage, agentName)
	if len(groups) == 0 || len(groups) == 1 && groups[0].key == MainAgent {
		return nil, nil
	}
	return groups, nil
}

// writeAgents says what each agent spent, when a sub-agent spent any.
func (e Explanation) writeAgents(w io.Writer) error {
	if len(e.agents) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nSpend per agent (sub-agents by the name their agent gave them):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, g := range e.agents {
		fmt.Fprintf(tw, "  %s\t%d call(s)\t%d tokens\t%s\n", g.key, len(g.calls), g.totals.Tokens, USDCell(g.totals))
	}
	return tw.Flush()
}

// agentsJSON is the spend per agent for --json.
func (e Explanation) agentsJSON() []AgentSpendJSON {
	out := []AgentSpendJSON{}
	for _, g := range e.agents {
		out = append(out, AgentSpendJSON{Agent: g.key, Calls: len(g.calls), Tokens: g.totals.Tokens, USD: g.totals.USD,
			USDSource: g.totals.USDSource().String()})
	}
	return out
}

// subAgentCaps says a task's subAgents: caps in BUDGET.md ("" for none).
func subAgentCaps(l purser.SubAgentLimits) string {
	if l.IsZero() {
		return ""
	}
	var parts []string
	if l.MaxSpawn != nil {
		parts = append(parts, fmt.Sprintf("at most %d spawned", *l.MaxSpawn))
	}
	var each []string
	if l.Each.USD != nil {
		each = append(each, l.Each.USD.String())
	}
	if l.Each.Tokens != nil {
		each = append(each, fmt.Sprintf("%d tokens", *l.Each.Tokens))
	}
	if len(each) > 0 {
		parts = append(parts, "each at most "+strings.Join(each, " and "))
	}
	return "\nSub-agents (subAgents:): " + strings.Join(parts, "; ") + ". A spawn past the count, and a sub-agent's request " +
		"past its own cap, is refused at Purser's door with a message its parent reads; the task's caps bind them too.\n"
}
