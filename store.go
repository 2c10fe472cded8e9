package purser

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/purser-dev/purser/budget"
)

// TaskRecord is a task as the store keeps it: its definition, its state and
// why it is in it.
type TaskRecord struct {
	ID        string
	RunID     string
	Goal      string
	Workspace string
	File      string
	Budget    budget.Config
	State     TaskState
	Reason    string // why it stopped: the budget error, the failure, "validators passed"
	// Elapsed is the wall time the task has run, across resumes.
	Elapsed time.Duration
	// Owner identifies the process running the task ("host pid start"), so
	// that a RUNNING task whose process died shows as interrupted.
	Owner     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// IterationRecord is one iteration of a task.
type IterationRecord struct {
	TaskID     string
	N          int
	StartedAt  time.Time
	EndedAt    time.Time
	Outcome    string // passed, failed, stopped
	Validators []ValidatorResult
}

// CallOutcome is how a call ended.
type CallOutcome string

// Call outcomes.
const (
	CallOK        CallOutcome = "ok"
	CallCancelled CallOutcome = "cancelled" // stopped by the hard cap or a signal
	CallTransient CallOutcome = "transient_error"
	CallFailed    CallOutcome = "error"
	CallRefused   CallOutcome = "refused" // not admitted by the budget; nothing was sent
	// CallInterrupted: Purser itself stopped mid-call (it was killed); the
	// usage recorded up to then stands.
	CallInterrupted CallOutcome = "interrupted"
	// CallStalled: nothing came from the agent or the provider for the
	// stall window; the call was ended and is retried like a transient one.
	CallStalled CallOutcome = "stalled"
)

// CallRecord is one call to a backend, retries included (each its own record).
type CallRecord struct {
	ID              string
	TaskID          string
	Iteration       int
	Kind            CallKind
	Attempt         int
	Model           string
	StartedAt       time.Time
	EndedAt         time.Time
	Outcome         CallOutcome
	Error           string
	ContextTokens   int
	Reserved        budget.Amount
	MaxOutputTokens int64
	Note            string // e.g. the backend's reported cost against Purser's estimate
	// Process is the process running the call, as the backend gave it to
	// CallHooks.Started ("" when none or not yet started): on resume, what
	// a dead owner's call left running is found by it and killed.
	Process string
	// InnerRetries counts the requests the agent retried by itself within
	// this call (Claude Code's api_retry lines, Codex's reconnects, Gemini
	// CLI's attempts): retries Purser could not switch off, shown in BUDGET.md.
	InnerRetries int
	// Session is the CLI's own session file of the call (Claude Code's
	// transcript, Codex's rollout, Gemini CLI's chat file), as the backend
	// gave it to CallHooks.Session ("" when none or not known yet): on
	// resume, what a dead call spent is read from it (SpendRecoverer).
	Session string
	// Wire is the journal in which Purser's metering proxy wrote the usage
	// of every reply the call's provider finished sending, as the backend
	// gave it to CallHooks.Wire before the agent started ("" when not
	// metered): on resume, it covers a reply the CLI died holding
	// (SpendRecoverer).
	Wire string
}

// LedgerEntry is one usage event in the append-only usage ledger. Key makes
// appending idempotent: appending the same key twice records it once.
type LedgerEntry struct {
	Key       string
	TaskID    string
	RunID     string
	CallID    string
	Iteration int
	Kind      CallKind
	Event     budget.UsageEvent
	At        time.Time
}

// DegradeRecord is a degrade action the engine took, and why.
type DegradeRecord struct {
	TaskID    string
	Iteration int
	Call      CallKind
	Action    DegradeAction
	Tier      budget.Tier
	Metric    budget.Metric
	Scope     budget.Scope
	Detail    string
	At        time.Time
}

// CallUsage is what one call spent on one model, by one agent (the main
// agent or one of its sub-agents): its ledger entries summed.
type CallUsage struct {
	CallID    string
	Iteration int
	Kind      CallKind
	Model     string
	// Agent is "" for the main agent, else the sub-agent (budget.UsageEvent.Agent).
	Agent  string
	Totals budget.Totals
	// CachedTokens is the part of Totals.Tokens read from a prompt cache.
	CachedTokens int64
}

// PriceSourceUsage is what one price table, at one set of its rates, priced
// for a task (UsageEvent.PriceSource: "built-in prices (…, read DATE) as
// MODEL (standard, base rates)", "file PATH sha256:… as …", or why a model
// had no price), by the cost source it gave: the events summed.
type PriceSourceUsage struct {
	Source     string
	CostSource budget.CostSource // estimated, unknown, or list (a flat-rate plan)
	Events     int64
	Tokens     int64
	USD        budget.USD // 0 for unknown
}

// TaskClaimedError is returned by Store.ClaimTask for a task another live
// process is running.
type TaskClaimedError struct {
	TaskID string
	Owner  string // the process running it: "host pid start"
}

func (e *TaskClaimedError) Error() string {
	return fmt.Sprintf("task %s is RUNNING in another process (%s)", e.TaskID, e.Owner)
}

// CheckClaim is the rule every store's ClaimTask applies under its lock to
// a task recorded in state under owner: t.Owner may claim it unless another
// owner runs it and ownerGone does not say that owner is gone.
func CheckClaim(t TaskRecord, state TaskState, owner string, ownerGone func(owner string) bool) error {
	if state == StateRunning && owner != "" && owner != t.Owner && !ownerGone(owner) {
		return &TaskClaimedError{TaskID: t.ID, Owner: owner}
	}
	return nil
}

// ErrNoLedgerKey refuses a ledger entry without an idempotency key: it
// could be counted twice.
var ErrNoLedgerKey = errors.New("an idempotency key is required")

// CheckLedgerKeys is what every store checks before appending entries: a
// batch holding an entry without a key is refused whole.
func CheckLedgerKeys(entries []LedgerEntry) error {
	for _, e := range entries {
		if e.Key == "" {
			return ErrNoLedgerKey
		}
	}
	return nil
}

// BudgetChange is a task's budget changed by the user on resume: from what,
// to what, by whom, when, and from which file.
type BudgetChange struct {
	TaskID string
	At     time.Time
	By     string // user@host
	Source string // the file the new budget came from
	From   budget.Config
	To     budget.Config
}

// Store keeps runs, tasks, iterations, calls, the usage ledger, degrade
// actions and artifacts. Implementations must be safe for concurrent use.
// It is the small interfaces below, composed: a consumer takes the one it
// uses (the dashboard reads through StoreReader; the engine writes all).
type Store interface {
	TaskStore
	TaskJournal
	Ledger
	Close() error
}

// StoreReader is everything a Store says, nothing it writes: what the
// dashboard, the reports and replays read.
type StoreReader interface {
	TaskReader
	JournalReader
	LedgerReader
}

// TaskReader reads runs and tasks.
type TaskReader interface {
	// Run returns a run; a missing one is an error matching ErrNotFound.
	Run(ctx context.Context, id string) (Run, error)
	// Task returns a task; a missing one is an error matching ErrNotFound.
	Task(ctx context.Context, id string) (TaskRecord, error)
	Tasks(ctx context.Context) ([]TaskRecord, error)
}

// TaskStore keeps runs and tasks: their budgets, states, owners and wall
// time.
type TaskStore interface {
	TaskReader
	SaveRun(ctx context.Context, run Run) error
	// JoinRun creates a run if it does not exist, atomically, and returns the
	// run as stored: the existing one, unchanged, when it did exist.
	JoinRun(ctx context.Context, run Run) (Run, error)
	// SaveRunElapsed records the run's wall time, keeping the larger of the
	// stored and the given figure (processes sharing a run each save theirs).
	SaveRunElapsed(ctx context.Context, id string, elapsed time.Duration) error
	// SaveTask creates or updates a task's definition and state.
	SaveTask(ctx context.Context, t TaskRecord) error
	// ClaimTask records t as RUNNING under t.Owner, atomically: it fails
	// with a *TaskClaimedError when another owner runs the task and
	// ownerGone does not say that owner is gone, so two processes never run
	// one task at once.
	ClaimTask(ctx context.Context, t TaskRecord, ownerGone func(owner string) bool) error
	SetTaskState(ctx context.Context, id string, state TaskState, reason string) error
	SaveElapsed(ctx context.Context, id string, elapsed time.Duration) error
}

// JournalReader reads what a task did.
type JournalReader interface {
	Iterations(ctx context.Context, taskID string) ([]IterationRecord, error)
	Calls(ctx context.Context, taskID string) ([]CallRecord, error)
	Degrades(ctx context.Context, taskID string) ([]DegradeRecord, error)
	BudgetChanges(ctx context.Context, taskID string) ([]BudgetChange, error)
	Artifact(ctx context.Context, taskID, name string) ([]byte, error)
}

// TaskJournal keeps what a task did: its iterations, calls, degrade
// actions, budget changes and artifacts.
type TaskJournal interface {
	JournalReader
	SaveIteration(ctx context.Context, it IterationRecord) error
	SaveCall(ctx context.Context, c CallRecord) error
	SaveDegrade(ctx context.Context, d DegradeRecord) error
	// SaveBudgetChange records a change of a task's budget made by the user.
	SaveBudgetChange(ctx context.Context, c BudgetChange) error
	SaveArtifact(ctx context.Context, taskID, name string, content []byte) error
}

// LedgerReader reads the usage ledger and its running totals.
type LedgerReader interface {
	Usage(ctx context.Context, taskID string) ([]LedgerEntry, error)
	// CallUsage returns what each call of a task spent, per model and agent, in the
	// order the calls first reported usage, at a cost that grows with the
	// calls, not with the ledger's events.
	CallUsage(ctx context.Context, taskID string) ([]CallUsage, error)
	// UsageTotals returns a task's ledger totals, at a cost that does not
	// grow with the ledger.
	UsageTotals(ctx context.Context, taskID string) (budget.Totals, error)
	// RunUsageTotals returns the ledger totals of every task of a run.
	RunUsageTotals(ctx context.Context, runID string) (budget.Totals, error)
	// PriceSources returns what each price table and its rates priced for
	// a task (the provenance of its estimates), in the order each was first
	// used.
	PriceSources(ctx context.Context, taskID string) ([]PriceSourceUsage, error)
}

// Ledger is the append-only usage ledger and its running totals.
type Ledger interface {
	LedgerReader
	// AppendUsage appends entries to the ledger atomically; an entry whose
	// Key is already there is ignored, so replaying a report never counts
	// twice.
	AppendUsage(ctx context.Context, entries ...LedgerEntry) error
}

// SharedRunBudget admits calls against a run budget that several processes
// share, through the database they share.
type SharedRunBudget interface {
	// ReserveRun holds want against the run's hard caps (caps fields at
	// budget.Unlimited are not capped), counting the run's recorded spend and
	// every unexpired hold. A hold that does not fit is refused with a
	// *budget.InsufficientBudgetError saying what does fit. The hold lasts
	// until released, or until ttl passes (a process that died), and is
	// recorded as by's, so that a resume can drop what a dead process held.
	ReserveRun(ctx context.Context, runID string, by Holder, caps, want budget.Amount, ttl time.Duration) (release func(), err error)
	// RunAvailable is what a hold could get now.
	RunAvailable(ctx context.Context, runID string, caps budget.Amount) (budget.Amount, error)
}

// RunUsageWatcher is a store that tells, as it happens, when any process on
// any host adds to a run's ledger (PostgreSQL: LISTEN/NOTIFY). The engine
// refreshes a shared run's spend on each such change; a store without it is
// polled.
type RunUsageWatcher interface {
	// WatchRunUsage returns a channel that receives each time the run's
	// ledger grows, in any process, until ctx ends; then it is closed.
	// Sends never block: changes close together may arrive as one.
	WatchRunUsage(ctx context.Context, runID string) (<-chan struct{}, error)
}
