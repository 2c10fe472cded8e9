package purser

import (
	"strings"

	"github.com/purser-dev/purser/budget"
)

// SubAgentLimits caps the sub-agents an agent spawns during a task (Claude
// Code's Agent tool, its Task tool before 2.1): how many it may spawn in
// all, and what each may spend. The door attributes every request to the
// sub-agent that sent it; the engine refuses the first request of a spawn
// past MaxSpawn, and a sub-agent's request that would take it past Each,
// with a message the parent agent reads as its tool's error. The task's
// own caps still bind every request, a sub-agent's included.
type SubAgentLimits struct {
	// MaxSpawn is how many sub-agents the task may spawn, over all its
	// calls; nil spawns without limit, 0 refuses every spawn.
	MaxSpawn *int
	// Each caps every sub-agent's own spend: USD and Tokens (input plus
	// output, as budget.UsageEvent.Tokens counts); nil leaves it uncapped.
	Each SubAgentCap
}

// SubAgentCap is what one sub-agent may spend.
type SubAgentCap struct {
	USD    *budget.USD
	Tokens *int64
}

// IsZero reports whether the limits cap nothing.
func (l SubAgentLimits) IsZero() bool {
	return l.MaxSpawn == nil && l.Each.USD == nil && l.Each.Tokens == nil
}

// SubAgentRefusalPrefix starts every refusal of a sub-agent's request:
// the door hands it to the agent as it is, not as "budget exhausted",
// since the task goes on.
const SubAgentRefusalPrefix = "purser: sub-agent "

// IsSubAgentRefusal reports whether msg refuses a sub-agent's request.
func IsSubAgentRefusal(msg string) bool { return strings.HasPrefix(msg, SubAgentRefusalPrefix) }
