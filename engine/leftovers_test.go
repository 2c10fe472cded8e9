package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
)

// killingOwners is fakeOwners that also records which leftovers it was asked
// to kill, and how many calls had been made by then.
type killingOwners struct {
	fakeOwners
	f *fixture

	mu            sync.Mutex
	killed        []string
	callsAtKill   int
	killedAlready bool
}

func (o *killingOwners) KillLeftovers(process string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.killed = append(o.killed, process)
	if !o.killedAlready {
		o.callsAtKill, o.killedAlready = len(o.f.calls()), true
	}
	return 1
}

// Issue 11: on resume, before anything starts, what the dead owner's
// unfinished call left running is killed, by the process it recorded; a
// call that ended, or recorded no process, is left alone.
func TestResumeKillsTheDeadOwnersCallFirst(t *testing.T) {
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100}\n    files: {src/fixed: yes}\n")
	owners := &killingOwners{fakeOwners: fakeOwners{alive: map[string]bool{}}, f: f}
	f.cfg.Owners = owners
	ctx := context.Background()
	must(t, f.store.SaveTask(ctx, purser.TaskRecord{ID: f.task.ID, Workspace: f.workspace, State: purser.StateRunning, Owner: "dead", Budget: f.task.Budget}))
	start := time.Unix(100, 0)
	for _, c := range []purser.CallRecord{
		{ID: "cut", TaskID: f.task.ID, Iteration: 0, Kind: purser.CallMain, Attempt: 1, StartedAt: start, Process: "4242 777"},
		{ID: "ended", TaskID: f.task.ID, Iteration: 0, Kind: purser.CallMain, Attempt: 1, StartedAt: start, EndedAt: start.Add(time.Second), Outcome: purser.CallOK, Process: "4343 888"},
		{ID: "unstarted", TaskID: f.task.ID, Iteration: 0, Kind: purser.CallMain, Attempt: 2, StartedAt: start.Add(2 * time.Second)},
	} {
		must(t, f.store.SaveCall(ctx, c))
	}
	must(t, f.run())
	if len(owners.killed) != 1 || owners.killed[0] != "4242 777" {
		t.Fatalf("leftovers killed for %q, want only the cut call's process %q", owners.killed, "4242 777")
	}
	if owners.callsAtKill != 0 {
		t.Fatalf("%d call(s) made before the dead owner's leftovers were killed", owners.callsAtKill)
	}
	calls, err := f.store.Calls(ctx, f.task.ID)
	must(t, err)
	for _, c := range calls {
		if c.ID == "cut" && c.Outcome != purser.CallInterrupted {
			t.Fatalf("the cut call is %q, want interrupted", c.Outcome)
		}
		if c.ID != "cut" && c.ID != "ended" && c.ID != "unstarted" && c.Process != "" {
			t.Fatalf("the sim backend starts no process, yet call %s recorded %q", c.ID, c.Process)
		}
	}
}

// processBackend says its call runs in process "P 1", then looks in the
// store, while the call is still in flight, for that process on the call.
type processBackend struct {
	store interface {
		Calls(context.Context, string) ([]purser.CallRecord, error)
	}
	seen string
}

func (b *processBackend) Call(ctx context.Context, req purser.CallRequest, report purser.UsageFunc) (purser.CallResult, error) {
	req.Hooks.Started("P 1")
	calls, err := b.store.Calls(ctx, req.TaskID)
	if err != nil {
		return purser.CallResult{}, err
	}
	for _, c := range calls {
		if c.EndedAt.IsZero() {
			b.seen = c.Process
		}
	}
	return purser.CallResult{}, nil
}

// The process a backend reports is on the call record while the call is
// still running: a crash at any later moment leaves it for the resume.
func TestCallProcessIsRecordedWhileTheCallRuns(t *testing.T) {
	f := newFixture(t, "steps:\n  - usage: {inputTokens: 100}\n")
	b := &processBackend{store: f.store}
	f.cfg.Backends = func(purser.BackendSpec) (purser.Backend, error) { return b, nil }
	_ = f.run() // the validator fails: the call is what matters here
	if b.seen != "P 1" {
		t.Fatalf("in flight, the call record held process %q, want %q", b.seen, "P 1")
	}
}
