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
