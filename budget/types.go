// Package budget is Purser's three-tier budget model: the tiers, the metrics,
// usage events, the Manager that tracks them and the reservations that admit
// calls. It is pure arithmetic: no I/O, and time comes from an injected Clock.
package budget

import (
	"fmt"
	"time"
)

// Tier is a budget tier. Tiers are ordered: Optimal < Warning < Hard.
type Tier uint8

// The three tiers of the spec.
const (
	Optimal Tier = iota
	Warning
	Hard
)

func (t Tier) String() string {
	switch t {
	case Optimal:
		return "optimal"
	case Warning:
		return "warning"
	case Hard:
		return "hard"
	}
	return fmt.Sprintf("tier(%d)", uint8(t))
}

// MarshalText writes the tier as the spec's lower-case name.
func (t Tier) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads a tier name.
func (t *Tier) UnmarshalText(b []byte) error {
	switch string(b) {
	case "optimal":
		*t = Optimal
	case "warning":
		*t = Warning
	case "hard":
		*t = Hard
	default:
		return fmt.Errorf("unknown tier %q: want optimal, warning or hard", b)
	}
	return nil
}

// Metric is one of the four independent budget metrics.
type Metric uint8

// The metrics of the spec. NoMetric marks "no metric caused this".
const (
	NoMetric Metric = iota
	Money
	Tokens
	Time
	Iterations
)

// Metrics lists the metrics in display order.
var Metrics = []Metric{Money, Tokens, Time, Iterations}

func (m Metric) String() string {
	switch m {
	case Money:
		return "money"
	case Tokens:
		return "tokens"
	case Time:
		return "time"
	case Iterations:
		return "iterations"
	}
	return "none"
}

// MarshalText writes the metric as the spec's name.
func (m Metric) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// configKey is the metric's key in a budget config.
func (m Metric) configKey() string {
	switch m {
	case Money:
		return "usd"
	case Tokens:
		return "tokens"
	case Time:
		return "timeMinutes"
	case Iterations:
		return "maxIterations"
	}
	return ""
}

// format renders a value of the metric in its natural unit.
// Format renders a value of the metric, in its unit, for people.
func (m Metric) Format(v int64) string {
	switch m {
	case Money:
		return USD(v).String()
	case Time:
		return time.Duration(v).Round(time.Millisecond).String()
	}
	return fmt.Sprint(v)
}

// Scope says whose budget: the task's own, or the run's it belongs to.
type Scope uint8

// The two scopes of the spec's getTier.
const (
	ScopeTask Scope = iota
	ScopeRun
	// ScopeNamed is a named, long-lived budget that runs draw from (a
	// team's month); InsufficientBudgetError.Name says which.
	ScopeNamed
)

func (s Scope) String() string {
	switch s {
	case ScopeRun:
		return "run"
	case ScopeNamed:
		return "named"
	}
	return "task"
}

// CostSource says where one event's dollar figure came from.
type CostSource uint8

const (
	// CostNone: the event makes no claim about money (a pure time or iteration
	// marker, or an event with no tokens). It leaves USD provenance unchanged.
	CostNone CostSource = iota
	// CostReported: the backend reported the figure.
	CostReported
	// CostEstimated: Purser priced the tokens from its catalogue.
	CostEstimated
	// CostUnknown: money was spent but nobody knows how much. Never $0.
	CostUnknown
	// CostList: a list price, not money spent: the backend runs on a
	// flat-rate plan (billing: subscription), so its dollars, reported or
	// estimated, are what the usage would have cost on an API key. Recorded
	// and shown as list, never summed into money spent nor checked against a
	// money cap.
	CostList
)

func (c CostSource) String() string {
	switch c {
	case CostReported:
		return "reported"
	case CostEstimated:
		return "estimated"
	case CostUnknown:
		return "unknown"
	case CostList:
		return "list"
	}
	return "none"
}

// MarshalText writes the provenance name.
func (c CostSource) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// USDSource labels a total dollar figure by the provenance of its parts.
type USDSource uint8

const (
	// SourceReported: every dollar figure was reported by a backend (or
	// nothing has been spent yet).
	SourceReported USDSource = iota
	// SourceEstimated: every figure is known, some were estimated.
	SourceEstimated
	// SourcePartial: some figures are unknown; the total is a lower bound and
	// money is enforced on that known part.
	SourcePartial
	// SourceUnknown: no figure is known; money is not enforced.
	SourceUnknown
)

func (s USDSource) String() string {
	switch s {
	case SourceEstimated:
		return "estimated"
	case SourcePartial:
		return "partial"
	case SourceUnknown:
		return "unknown"
	}
	return "reported"
}

// MarshalText writes the provenance name.
func (s USDSource) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UsageEvent is one recording of usage. Input tokens are all the prompt's
// tokens, the cached ones included; CacheReadTokens and CacheWriteTokens are
// the parts of them read from and written to the cache (backends normalise to
// this shape: Anthropic reports input without its cache tokens, OpenAI and
// Gemini with them). Output tokens include reasoning tokens.
type UsageEvent struct {
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	ReasoningTokens  int64 // part of OutputTokens, kept for reports
	// CacheWrite1hTokens is the part of CacheWriteTokens written to the
	// 1-hour cache (Anthropic bills it at 2× input, the 5-minute cache at
	// 1.25×); the rest are 5-minute writes.
	CacheWrite1hTokens int64
	// ServiceTier is the provider's service tier for the request ("standard",
	// "priority", "flex", "batch"); empty is standard.
	ServiceTier string
	// RequestInputTokens is, on an event that is one piece of a request
	// whose usage arrives in pieces (Claude's output comes in its own
	// stream event, after the input), the whole request's input, cached
	// tokens included: a long-context price tier is chosen on it, not on
	// the piece's own InputTokens. 0 when the event is a whole request.
	RequestInputTokens int64

	USD        USD // meaningful when CostSource is reported or estimated
	CostSource CostSource
	Model      string
	// Agent says who in the agent spent the usage: "" for the main agent,
	// else the sub-agent its CLI names (Claude Code's Task tool: the
	// sub-agent's type and description, or the tool_use id that started it).
	Agent string
	// PriceSource says, for an estimated or unknown cost, which price table
	// priced the event and which of its rates applied (or why none did).
	PriceSource string
	// SettlesUnknown, on a reported event, counts the earlier unknown-cost
	// events of the same call whose dollars this report includes: they stop
	// counting as unknown (Claude Code reports a call's full cost at its end,
	// after the streamed usage of an unpriced model was recorded as unknown).
	SettlesUnknown int64

	// Elapsed is wall time to add to the budget's clock, for usage replayed
	// from a record. A live task's time comes from the Manager's clock.
	Elapsed time.Duration
	// IterationEnd marks the end of an iteration; it counts when it ends.
	IterationEnd bool
}

// Tokens is the event's contribution to the token metric.
func (e UsageEvent) Tokens() int64 { return SatAdd(e.InputTokens, e.OutputTokens) }

// Validate reports an event that cannot be right: negative figures, or more
// cache tokens than input tokens.
func (e UsageEvent) Validate() error {
	switch {
	case e.InputTokens < 0:
		return fmt.Errorf("inputTokens: must not be negative, got %d", e.InputTokens)
	case e.OutputTokens < 0:
		return fmt.Errorf("outputTokens: must not be negative, got %d", e.OutputTokens)
	case e.CacheReadTokens < 0:
		return fmt.Errorf("cacheReadTokens: must not be negative, got %d", e.CacheReadTokens)
	case e.CacheWriteTokens < 0:
		return fmt.Errorf("cacheWriteTokens: must not be negative, got %d", e.CacheWriteTokens)
	case e.ReasoningTokens < 0 || e.ReasoningTokens > e.OutputTokens:
		return fmt.Errorf("reasoningTokens: must be between 0 and outputTokens (%d), got %d", e.OutputTokens, e.ReasoningTokens)
	case e.CacheWrite1hTokens < 0 || e.CacheWrite1hTokens > e.CacheWriteTokens:
		return fmt.Errorf("cacheWrite1hTokens: must be between 0 and cacheWriteTokens (%d), got %d", e.CacheWriteTokens, e.CacheWrite1hTokens)
	case e.SettlesUnknown < 0 || (e.SettlesUnknown > 0 && e.CostSource != CostReported && e.CostSource != CostList):
		return fmt.Errorf("settlesUnknown: only a reported (or list) cost settles unknown ones, and never a negative count (got %d, %s)", e.SettlesUnknown, e.CostSource)
	case SatAdd(e.CacheReadTokens, e.CacheWriteTokens) > e.InputTokens:
		return fmt.Errorf("cacheReadTokens + cacheWriteTokens (%d) must not exceed inputTokens (%d): input counts cached tokens too",
			e.CacheReadTokens+e.CacheWriteTokens, e.InputTokens)
	case e.USD < 0:
		return fmt.Errorf("costUsd: must not be negative, got %s", e.USD.Decimal())
	case e.Elapsed < 0:
		return fmt.Errorf("elapsedMs: must not be negative, got %d", e.Elapsed.Milliseconds())
	}
	return nil
}

// Status is a budget's state at one moment: the spec's BudgetStatus plus the
// provenance of its dollar figure and which metric set the tier.
type Status struct {
	Tier Tier
	// Cause is the metric that put the budget in its tier (NoMetric when
	// Optimal). When several metrics share the tier, the first in Metrics.
	Cause Metric

	UsedUSD   USD
	USDSource USDSource
	// ListUSD is what usage on flat-rate plans would have cost at list
	// prices (CostList events): shown apart, never part of UsedUSD.
	ListUSD        USD
	UsedTokens     int64
	UsedTime       time.Duration
	UsedIterations int

	// Percentages of the tier's threshold; invalid where it is not configured.
	USDPctOfOptimal    Percent
	USDPctOfHard       Percent
	TokensPctOfOptimal Percent
	TokensPctOfHard    Percent
	TimePctOfOptimal   Percent
	TimePctOfHard      Percent

	IsInWarning bool
	IsAtHardCap bool
	// PastWarningLine is true when a metric has reached its warning
	// threshold (or, having none, its optimal one): staged degrade actions
	// configured "at: warning" apply from here.
	PastWarningLine bool
}

// Used returns how much of a metric the status says was used, in the
// metric's unit (nano-USD, tokens, nanoseconds, iterations).
func (s Status) Used(m Metric) int64 {
	switch m {
	case Money:
		return int64(s.UsedUSD)
	case Tokens:
		return s.UsedTokens
	case Time:
		return int64(s.UsedTime)
	case Iterations:
		return int64(s.UsedIterations)
	}
	return 0
}

// BudgetExhaustedError is returned when work is refused because a budget is at
// its hard cap. Retrying it is never right.
type BudgetExhaustedError struct {
	Scope  Scope  // whose budget: the task's or its run's
	Name   string // for ScopeNamed: the named budget's name
	Metric Metric // the metric that reached its cap
	Status Status // that scope's status when refused
	Limit  int64  // the cap, in the metric's unit
}

func (e *BudgetExhaustedError) Error() string {
	return fmt.Sprintf("budget exhausted: %s hard cap on %s reached (%s used of %s)",
		e.Scope, e.Metric, e.Metric.Format(e.Status.Used(e.Metric)), e.Metric.Format(e.Limit))
}
