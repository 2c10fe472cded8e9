// Package purser holds Purser's domain: tasks, runs, iterations and calls,
// their states, the degrade policy, and the interfaces the engine works
// through (Backend, Store, ValidatorRunner). Implementations live in packages
// named after what they wrap (sqlite, backend/sim, …); only cmd/purser wires
// them together.
package purser

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/workspace"
)

// TaskState is where a task is in its life.
type TaskState string

// Task states. BLOCKED is a stop by budget: the task can be resumed with a
// bigger budget. FAILED is a stop by an error that is not the budget's.
const (
	StatePending TaskState = "PENDING"
	StateRunning TaskState = "RUNNING"
	StateDone    TaskState = "DONE"
	StateBlocked TaskState = "BLOCKED"
	StateFailed  TaskState = "FAILED"
)

// CallKind says what a backend call is for.
type CallKind string

// The kinds of call. Planning regeneration and self-review are the spec's
// "optional calls", skipped while disable_self_review is in force.
const (
	CallPlanning   CallKind = "planning"
	CallMain       CallKind = "main"
	CallSelfReview CallKind = "self_review"
)

// Validator is a command that checks the task's work: exit 0 passes.
type Validator struct {
	Name    string
	Run     string        // run by the shell in the workspace
	Timeout time.Duration // 0: DefaultValidatorTimeout
}

// DefaultValidatorTimeout bounds a validator with no timeout of its own.
const DefaultValidatorTimeout = 10 * time.Minute

// ValidatorResult is the outcome of running one validator.
type ValidatorResult struct {
	Name     string
	Passed   bool
	ExitCode int // -1 when it did not exit by itself (timeout, signal)
	TimedOut bool
	Output   string // stdout and stderr interleaved, trimmed from the middle when long
	Duration time.Duration
}

// DegradeAction is one way to spend less in WARNING.
type DegradeAction string

// The degrade actions of the spec.
const (
	ShrinkContext     DegradeAction = "shrink_context"
	RepairOnlyMode    DegradeAction = "repair_only_mode"
	DisableSelfReview DegradeAction = "disable_self_review"
	SwitchTierCheap   DegradeAction = "switch_tier_cheap"
)

// KnownDegradeActions lists every action, in the default order.
var KnownDegradeActions = []DegradeAction{ShrinkContext, RepairOnlyMode, DisableSelfReview, SwitchTierCheap}

// DegradeStage says from when an action applies.
type DegradeStage string

const (
	// AtWarningTier applies the action on entering WARNING (the default).
	AtWarningTier DegradeStage = ""
	// AtWarningLine holds the action back until a metric reaches its
	// `warning` threshold, which may lie past the start of WARNING.
	AtWarningLine DegradeStage = "warning"
)

// DegradeStep is one configured action and its stage.
type DegradeStep struct {
	Action DegradeAction
	At     DegradeStage
}

// ShrinkPolicy configures the shrink_context action.
type ShrinkPolicy struct {
	Strategy  string // a context strategy name; "failing_first" by default
	MaxTokens int    // token cap for the shrunk context
}

// DegradePolicy is the ordered list of actions taken in WARNING.
type DegradePolicy struct {
	Steps  []DegradeStep
	Shrink ShrinkPolicy
	// BudgetHint (budgetHint: true) has Purser's door append a short note
	// of what the budget has left to each model request (WireGrant.Hint).
	BudgetHint bool
	// WrapUp (wrapUp: true) asks, once WARNING is passed or the next
	// request would not fit, for one tool-free summary of what is done and
	// what remains, written to STATUS.md before the hard stop.
	WrapUp bool
}

// DefaultDegradePolicy is the spec's recommended sequence.
func DefaultDegradePolicy() DegradePolicy {
	p := DegradePolicy{Shrink: ShrinkPolicy{Strategy: "failing_first", MaxTokens: 12000}}
	for _, a := range KnownDegradeActions {
		p.Steps = append(p.Steps, DegradeStep{Action: a})
	}
	return p
}

// Task is one piece of work for an agent.
type Task struct {
	ID         string
	Goal       string
	Issue      string
	Workspace  string // absolute path
	File       string // the task file it came from, if any
	Validators []Validator
	Backend    BackendSpec
	ModelTier  string // the tier to start on, e.g. "standard"
	Budget     budget.Config
	Degrade    DegradePolicy
	SelfReview bool
	Planning   bool
	// DrawFrom are the named budgets (NamedBudgets) the task's run draws
	// from, by name, sorted: the task file's drawFrom: and purser.yaml's.
	// Draws are the run's, since a named budget counts a run's spend:
	// every task of the run then draws from them.
	DrawFrom []string
	// SubAgents caps the sub-agents the agent spawns (subAgents:).
	SubAgents SubAgentLimits
}

// BackendSpec names a backend and its model tiers.
type BackendSpec struct {
	Name   string            // as named in purser.yaml, or the type for inline ones
	Type   string            // sim, claude, codex, openai, exec, …
	Models map[string]string // tier name → model, e.g. cheap → claude-haiku-4-5
	// CallTimeout bounds one call (0: DefaultCallTimeout). A call that runs
	// past it is cancelled and counts as a transient failure.
	CallTimeout time.Duration
	// StallTimeout ends a call from which nothing came (no output from the
	// agent, no growth of its session file, no bytes of the provider's
	// stream) for this long, as a transient failure (0: the engine's
	// default, DefaultStallTimeout; negative: never).
	StallTimeout time.Duration
	// Options are the backend type's own settings: the options its package
	// declares (a pointer to them), as the config loader decoded, validated
	// and checked them; or, from code that builds a spec by hand, a
	// map[string]any of option to value, which the backend's New decodes
	// as strictly.
	Options any
	// Dir is the directory relative paths in Options are resolved against.
	Dir string
	// Billing says whether the backend's dollars are money spent (BillingAPI,
	// the default) or list prices on a flat-rate plan (BillingSubscription).
	Billing Billing
	// AllowUnpriced lets a call on a model Purser has no price for start
	// although only a money cap bounds it (`unpricedModel: allow`): the user
	// accepts that its dollars are known only when the backend reports them.
	AllowUnpriced bool
}

// Billing is how a backend's calls are paid for.
type Billing string

const (
	// BillingAPI (also the empty value): every dollar is money spent,
	// summed and checked against the money caps.
	BillingAPI Billing = "api"
	// BillingSubscription: the agent runs on a flat-rate plan (Claude Max, a
	// ChatGPT plan); its dollars are list prices, recorded as such and never
	// summed into money spent or checked against a money cap. The task is
	// steered by tokens, time and iterations.
	BillingSubscription Billing = "subscription"
)

// Subscription reports whether the backend bills by a flat-rate plan.
func (b BackendSpec) Subscription() bool { return b.Billing == BillingSubscription }

// Model returns the model of a tier, and whether the backend has that tier.
func (b BackendSpec) Model(tier string) (string, bool) {
	m, ok := b.Models[tier]
	return m, ok
}

// DefaultCallTimeout bounds a call whose backend sets no callTimeout.
const DefaultCallTimeout = 30 * time.Minute

// CheapTier is the tier switch_tier_cheap moves to.
const CheapTier = "cheap"

// Run is a batch of tasks, with an optional budget its tasks share.
type Run struct {
	ID     string
	Budget *budget.Config
	// Elapsed is the wall time the run has been running, across resumes and
	// the processes that share it, as last saved.
	Elapsed time.Duration
}

// CallRequest is what the engine asks a backend to do.
type CallRequest struct {
	TaskID    string
	Kind      CallKind
	Iteration int
	Attempt   int // 1 for the first try, 2 for the first retry, …
	Model     string
	Prompt    string
	// ContextTokens is the size of the context in the prompt, as counted.
	ContextTokens int
	// MaxOutputTokens is how much output the budget admits for this call;
	// 0 means no limit was set. Backends that can cap output must.
	MaxOutputTokens int64
	// MaxUSD is what is left under the hard money cap of the task and its
	// run; 0 means money is not capped. Backends with a spending fence of
	// their own (Claude Code's --max-budget-usd) set it to this.
	MaxUSD    budget.USD
	Workspace string
	// Guard says which files in and around Workspace are Purser's own: an
	// edit protocol asks it where it may write (Guard.Writable) and never
	// writes or deletes those. nil: Purser's files by name only (.purser/,
	// STATUS.md and BUDGET.md).
	Guard *workspace.Guard
	// Price is how the engine prices the usage the backend reports (nil:
	// it is recorded unpriced). Pricing happens in one place, where usage
	// is recorded; backends report tokens, the model, and a cost only when
	// their provider reported one. A backend whose provider reports its cost
	// only at the end (Claude Code) uses Price to settle that report against
	// exactly what its streamed usage was recorded at.
	Price func(budget.UsageEvent) budget.UsageEvent
	// StallTimeout is the stall window of this call (0: no stall
	// detection): a backend ends a call from which nothing came for this
	// long and returns a *StallError.
	StallTimeout time.Duration
	// Hooks are how the backend tells the engine what it learns while the
	// call runs: its process, session file and wire journal, and the
	// agent's own retries.
	Hooks CallHooks
}

// CallResult is what a call produced besides its usage.
type CallResult struct {
	Text string
	// Note is recorded with the call, e.g. how the backend's reported cost
	// compared with Purser's estimate.
	Note string
	// Feedback is for the agent: problems with its answer (a file block that
	// could not be applied) that the next iteration's context carries.
	Feedback string
}

// UsageFunc receives usage as a backend learns of it, possibly many times
// per call and from the backend's own goroutine.
type UsageFunc func(budget.UsageEvent)

// Backend runs calls: one prompt in, changes in the workspace and usage out.
// Call reports usage through report as soon as it is known, and returns
// promptly when ctx is cancelled (the hard cap), with ctx's error.
type Backend interface {
	Call(ctx context.Context, req CallRequest, report UsageFunc) (CallResult, error)
}

// SpendFence is implemented by a backend that can bound a call's money by
// itself. The engine asks it before a call on a model Purser has no price
// for: without a fence, only a token or time cap bounds such a call while it
// runs, since its dollars are known only when (if ever) the backend reports
// them.
type SpendFence interface {
	// FencesUSD reports whether a call on model, given CallRequest.MaxUSD,
	// cannot spend past MaxUSD unseen: the agent stops itself there (Claude
	// Code's --max-budget-usd), or the backend reports each dollar as it is
	// spent, so the engine's own money cap acts during the call.
	FencesUSD(model string) bool
}

// USDReporter is implemented by a backend that reports every dollar a call
// on model spends, as it streams, at the price it is billed (the sim, when
// its script gives each step's cost). Such a call is no risk to a money cap
// whether or not Purser prices the model, so nothing is said of its price.
// A fence alone (Claude Code's --max-budget-usd) is not this: for a model it
// does not know, its dollars are its own guess.
type USDReporter interface {
	ReportsUSD(model string) bool
}

// ErrTransient marks a backend error worth retrying: rate limit, overload,
// a dropped connection. Wrap it; the engine retries only errors that match.
var ErrTransient = errors.New("transient backend error")

// ValidatorRunner runs one validator in a workspace.
type ValidatorRunner interface {
	RunValidator(ctx context.Context, workspace string, v Validator) ValidatorResult
}

// ErrNotFound is returned by a Store for a task or run it does not have.
var ErrNotFound = errors.New("not found")

// TaskNotFoundError names the task a Store does not have.
func TaskNotFoundError(id string) error { return fmt.Errorf("task %q: %w", id, ErrNotFound) }
