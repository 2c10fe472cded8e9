package budget

import (
	"fmt"
	"strings"
	"time"
)

// Hint is the short note of what this budget and its run's have left under
// their hard caps, for the model itself to read (budgetHint:): money,
// tokens, wall time and iterations, each only when some budget in the chain
// caps it, each the tightest of the chain. Money and tokens count open
// reservations as spent, as admission does. Money nobody could price is
// said to be unknown, never $0; a partly known spend leaves at most what is
// said. It returns "" when nothing is capped.
func (m *Manager) Hint() string {
	type left struct {
		set        bool
		left, of   int64
		scope      Scope
		upperBound bool // money partly unknown: at most this much is left
		unknown    bool // money wholly unknown
	}
	var l [Iterations + 1]left
	take := func(metric Metric, c *Manager, cap, rem int64, partial, unknown bool) {
		rem = max(rem, 0)
		if cur := &l[metric]; !cur.set || rem < cur.left || unknown && !cur.unknown {
			*cur = left{set: true, left: rem, of: cap, scope: c.scope, upperBound: partial, unknown: unknown}
		}
	}
	tier := Optimal
	for c := m; c != nil; c = c.parent {
		c.mu.Lock()
		now := c.nowLocked()
		st := c.statusLocked(now)
		h := c.headroomLocked()
		lim := c.limits
		c.mu.Unlock()
		tier = max(tier, st.Tier)
		if v := lim[Money].hard; v.set {
			take(Money, c, v.v, int64(h.USD), st.USDSource == SourcePartial, st.USDSource == SourceUnknown)
		}
		if v := lim[Tokens].hard; v.set {
			take(Tokens, c, v.v, h.Tokens, false, false)
		}
		if v := lim[Time].hard; v.set {
			take(Time, c, v.v, v.v-int64(st.UsedTime), false, false)
		}
		if v := lim[Iterations].hard; v.set {
			take(Iterations, c, v.v, v.v-int64(st.UsedIterations), false, false)
		}
	}
	var parts []string
	whose := func(x left) string {
		if x.scope == ScopeRun {
			return " (run)"
		}
		return ""
	}
	if x := l[Money]; x.set {
		switch {
		case x.unknown:
			parts = append(parts, fmt.Sprintf("money left unknown (cap %s%s; spend not priced)", USD(x.of), whose(x)))
		case x.upperBound:
			parts = append(parts, fmt.Sprintf("at most %s of %s%s", USD(x.left), USD(x.of), whose(x)))
		default:
			parts = append(parts, fmt.Sprintf("%s of %s%s", USD(x.left), USD(x.of), whose(x)))
		}
	}
	if x := l[Tokens]; x.set {
		parts = append(parts, fmt.Sprintf("%d of %d tokens%s", x.left, x.of, whose(x)))
	}
	if x := l[Time]; x.set {
		parts = append(parts, fmt.Sprintf("%s of %s%s", time.Duration(x.left).Round(time.Second), time.Duration(x.of).Round(time.Second), whose(x)))
	}
	if x := l[Iterations]; x.set {
		parts = append(parts, fmt.Sprintf("%d of %d iterations%s", x.left, x.of, whose(x)))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("[purser budget, %s: %s left before the hard stop]", strings.ToUpper(tier.String()), strings.Join(parts, ", "))
}
