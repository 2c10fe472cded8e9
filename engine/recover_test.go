package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/backend/sim"
	"github.com/purser-dev/purser/budget"
)

// sessionBackend is the sim backend with a fake CLI session file: for any
// call it is asked about, the file holds total; it answers with what total
// holds beyond what the ledger recorded.
type sessionBackend struct {
	purser.Backend
	file  string
	total budget.UsageEvent

	mu      sync.Mutex
	queries []purser.SpendQuery
}

func (b *sessionBackend) RecoverSpend(_ context.Context, q purser.SpendQuery) (purser.RecoveredSpend, error) {
	b.mu.Lock()
	b.queries = append(b.queries, q)
	b.mu.Unlock()
	var have budget.UsageEvent
	for _, r := range q.Recorded {
		if r.Model == b.total.Model {
			have = r
		}
	}
	delta := budget.UsageEvent{Model: b.total.Model, InputTokens: max(b.total.InputTokens-have.InputTokens, 0),
		OutputTokens: max(b.total.OutputTokens-have.OutputTokens, 0)}
	return purser.RecoveredSpend{Session: b.file, Usage: []budget.UsageEvent{delta}}, nil
}

func withSessionBackend(t *testing.T, f *fixture, file string, total budget.UsageEvent) *sessionBackend {
	b := &sessionBackend{file: file, total: total}
	f.cfg.Backends = func(spec purser.BackendSpec) (purser.Backend, error) {
		s, err := sim.New(spec)
		b.Backend = s
		return b, err
	}
	return b
}

// callTokens sums the ledger's tokens of one call.
func callTokens(t *testing.T, f *fixture, callID string) int64 {
	t.Helper()
	entries, err := f.store.Usage(context.Background(), f.task.ID)
	must(t, err)
	var n int64
	for _, e := range entries {
		if e.CallID == callID {
			n += e.Event.Tokens()
		}
	}
	return n
}

func callByID(t *testing.T, f *fixture, id string) purser.CallRecord {
	t.Helper()
	calls, err := f.store.Calls(context.Background(), f.task.ID)
	must(t, err)
	for _, c := range calls {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no call %s", id)
	return purser.CallRecord{}
}

// deadOwnersCall records what a killed Purser leaves: the task RUNNING under
// a dead owner, a call it started and never ended with 100 tokens streamed
// into the ledger, and an earlier, ended call with its own session file.
func deadOwnersCall(t *testing.T, f *fixture) {
	ctx := context.Background()
	f.cfg.Owners = fakeOwners{alive: map[string]bool{}}
	must(t, f.store.SaveTask(ctx, purser.TaskRecord{ID: f.task.ID, Workspace: f.workspace, State: purser.StateRunning, Owner: "dead", Budget: f.task.Budget}))
	start := time.Unix(100, 0)
	must(t, f.store.SaveCall(ctx, purser.CallRecord{ID: "ended", TaskID: f.task.ID, Iteration: 1, Kind: purser.CallMain, Attempt: 1, Model: "sim-large",
		StartedAt: start, EndedAt: start.Add(time.Second), Outcome: purser.CallOK, Session: "/sessions/ended.jsonl"}))
	must(t, f.store.SaveCall(ctx, purser.CallRecord{ID: "cut", TaskID: f.task.ID, Iteration: 1, Kind: purser.CallMain, Attempt: 1, Model: "sim-large",
		StartedAt: start.Add(2 * time.Second), Session: "/sessions/cut.jsonl"}))
	must(t, f.store.AppendUsage(ctx, purser.LedgerEntry{Key: "cut/1", TaskID: f.task.ID, CallID: "cut", Iteration: 1, Kind: purser.CallMain,
		Event: budget.UsageEvent{InputTokens: 100, Model: "sim-large"}, At: start.Add(3 * time.Second)}))
}

// Issue 11, item 1: on resume, what the dead owner's unfinished call spent
// beyond the ledger — a reply the provider delivered and the CLI wrote to
// its session file, which Purser died before reading — is added to the
// ledger, and the call's note says what and from which file. The backend
// is told what the ledger holds for the call, and which files other calls
// claim.
func TestResumeRecoversTheDeadCallsSpendFromItsSessionFile(t *testing.T) {
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 10}\n    files: {src/fixed: yes}\n")
	deadOwnersCall(t, f)
	b := withSessionBackend(t, f, "/sessions/cut.jsonl", budget.UsageEvent{InputTokens: 100, OutputTokens: 900, Model: "sim-large"})
	must(t, f.run())

	if got := callTokens(t, f, "cut"); got != 1000 {
		t.Fatalf("the cut call has %d tokens in the ledger, want the session file's 1000", got)
	}
	if len(b.queries) != 1 {
		t.Fatalf("asked %d times, want once (for the cut call only)", len(b.queries))
	}
	q := b.queries[0]
	if q.Call.ID != "cut" || q.Workspace != f.workspace || len(q.Recorded) != 1 || q.Recorded[0].InputTokens != 100 || q.Recorded[0].Model != "sim-large" {
		t.Fatalf("query %+v: want the cut call, the workspace and its 100 recorded input tokens", q)
	}
	if !q.Claimed("/sessions/ended.jsonl") || q.Claimed("/sessions/cut.jsonl") {
		t.Fatal("Claimed must name another call's session file, and not the call's own")
	}
	c := callByID(t, f, "cut")
	if c.Outcome != purser.CallInterrupted || !strings.Contains(c.Note, "900 tokens") || !strings.Contains(c.Note, "/sessions/cut.jsonl") {
		t.Fatalf("the cut call is %q with note %q: want interrupted, saying 900 tokens were recovered from its file", c.Outcome, c.Note)
	}
	totals, err := f.store.UsageTotals(context.Background(), f.task.ID)
	must(t, err)
	if totals.Tokens != 1000+10 {
		t.Fatalf("the task's totals hold %d tokens, want the recovered call's 1000 and the new call's 10", totals.Tokens)
	}
}

// failInterruptedSave fails the first save of a call marked interrupted:
// Purser dying after it recovered a call's spend, before it marked the call.
type failInterruptedSave struct {
	purser.Store
	failed bool
}

func (s *failInterruptedSave) SaveCall(ctx context.Context, c purser.CallRecord) error {
	if c.Outcome == purser.CallInterrupted && !s.failed {
		s.failed = true
		return errors.New("killed")
	}
	return s.Store.SaveCall(ctx, c)
}

// A recovery cut short before the call was marked is done again on the next
// resume, and adds nothing twice: only what the file holds beyond the
// ledger is ever added.
func TestRecoveryTwiceCountsOnce(t *testing.T) {
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 10}\n    files: {src/fixed: yes}\n")
	deadOwnersCall(t, f)
	withSessionBackend(t, f, "/sessions/cut.jsonl", budget.UsageEvent{InputTokens: 100, OutputTokens: 900, Model: "sim-large"})
	f.cfg.Store = &failInterruptedSave{Store: f.store}
	if err := f.run(); err == nil {
		t.Fatal("the first resume should have failed at marking the call")
	}
	if got := callTokens(t, f, "cut"); got != 1000 {
		t.Fatalf("after the first resume the cut call has %d tokens, want 1000", got)
	}
	f.eng = nil // a new process
	must(t, f.run())
	if got := callTokens(t, f, "cut"); got != 1000 {
		t.Fatalf("after the second resume the cut call has %d tokens, want 1000 still", got)
	}
	if c := callByID(t, f, "cut"); c.Outcome != purser.CallInterrupted {
		t.Fatalf("the cut call is %q, want interrupted", c.Outcome)
	}
}

// Issue 11, item 4: a call the hard cap cut mid-reply is reconciled from its
// session file at once, so the recorded figure is what was delivered; the
// calls that ended by themselves are not asked about.
func TestCapCutCallIsReconciledFromItsSessionFile(t *testing.T) {
	f := newFixture(t, runaway)
	f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("1.0"), MaxIterations: ptr(10)}}
	f.task.Backend.AllowUnpriced = true // the script reports its dollars; the wrapper is no fence
	b := withSessionBackend(t, f, "/sessions/x.jsonl", budget.UsageEvent{InputTokens: 4000, OutputTokens: 4000, Model: "sim-large"})
	err := f.run()
	if !isCapStop(err) {
		t.Fatalf("RunTask = %v, want a budget stop", err)
	}
	if len(b.queries) != 1 {
		t.Fatalf("asked %d times, want once, for the cut call", len(b.queries))
	}
	cut := b.queries[0].Call.ID
	if got := callTokens(t, f, cut); got != 8000 {
		t.Fatalf("the cut call has %d tokens in the ledger, want the 8000 its session file holds", got)
	}
	if c := callByID(t, f, cut); c.Outcome != purser.CallCancelled || !strings.Contains(c.Note, "cut by the hard cap") {
		t.Fatalf("the cut call is %q with note %q", c.Outcome, c.Note)
	}
}

func isCapStop(err error) bool {
	var be *budget.BudgetExhaustedError
	return errors.As(err, &be)
}

// sessionReportingBackend says its call's session file, then looks in the
// store, while the call is still in flight, for it on the call.
type sessionReportingBackend struct {
	store interface {
		Calls(context.Context, string) ([]purser.CallRecord, error)
	}
	seen string
}

func (b *sessionReportingBackend) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	req.Hooks.Started("P 1")
	req.Hooks.Session("/home/u/.gemini/tmp/x/chats/session-1.jsonl")
	req.Hooks.Wire("/home/u/.local/state/purser/wire/gemini-1.jsonl")
	calls, err := b.store.Calls(ctx, req.TaskID)
	if err != nil {
		return purser.CallResult{}, err
	}
	for _, c := range calls {
		if c.EndedAt.IsZero() {
			b.seen = c.Session + " " + c.Process + " " + c.Wire
		}
	}
	return purser.CallResult{}, nil
}

// The session file a backend names is on the call record while the call
// still runs (with its process and its wire journal): a crash at any later
// moment leaves them for the resume.
func TestCallSessionIsRecordedWhileTheCallRuns(t *testing.T) {
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100}\n")
	b := &sessionReportingBackend{store: f.store}
	f.cfg.Backends = func(purser.BackendSpec) (purser.Backend, error) { return b, nil }
	_ = f.run()
	if want := "/home/u/.gemini/tmp/x/chats/session-1.jsonl P 1 /home/u/.local/state/purser/wire/gemini-1.jsonl"; b.seen != want {
		t.Fatalf("in flight, the call record held %q, want %q", b.seen, want)
	}
}
