package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// holdOwners is fakeOwners that also says whether a gone owner's process
// is gone (purser.ProcessOwners), or only its lease on the task.
type holdOwners struct {
	fakeOwners
	processGone bool
}

func (o holdOwners) ProcessGone(owner string) bool { return o.processGone && o.Gone(owner) }

// A process killed mid-call (kill -9) leaves its holds on the shared run
// and on the named budget the run draws from; they would lapse only after
// their TTL (an hour here). Resuming the task drops them — the dead owner's
// alone, never a live owner's — says how much it released, and the resumed
// task's calls are admitted at once instead of waiting out the TTL (the
// test's context, far shorter than the TTL, bounds the wait: a resume that
// waited ends interrupted, not DONE).
func TestResumeDropsTheDeadOwnersHolds(t *testing.T) {
	for _, tc := range []struct {
		name string
		// processGone: the owner's process is known dead (every hold it
		// placed goes); else it is gone for this task only (a worker whose
		// lease ran out: its other task's hold stays).
		processGone   bool
		wantReleased  string // what the resume says it released on the run
		wantOtherHeld int64  // tokens held on the run after the resume: the live owner's, and the dead one's other task's when it stays
	}{
		{"its process is gone: every hold it placed is dropped", true, "released 2 hold(s) of 49710 tokens", 200},
		{"its lease on the task ran out: only the task's holds are dropped", false, "released 1 hold(s) of 49700 tokens", 200 + 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "steps:\n  - usage: {inputTokens: 100}\n    files: {src/fixed: yes}\n")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const dead, live = "host-a 4242 777", "host-b 1 1"
			f.cfg.Owners = holdOwners{fakeOwners: fakeOwners{alive: map[string]bool{live: true}}, processGone: tc.processGone}
			f.cfg.Shared, f.cfg.Named = f.store, f.store
			capTokens := int64(50_000)
			caps := budget.Amount{USD: budget.UnlimitedUSD, Tokens: capTokens}
			must(t, f.store.SaveRun(ctx, purser.Run{ID: "shared", Budget: &budget.Config{Hard: budget.HardLimits{Tokens: &capTokens, MaxIterations: ptr(10)}}}))
			must(t, f.store.CreateBudget(ctx, purser.NamedBudget{Name: "team", Window: purser.WindowMonth,
				Budget: budget.Config{Hard: budget.HardLimits{Tokens: &capTokens}}}))
			must(t, f.store.DrawFrom(ctx, "shared", []string{"team"}))
			must(t, f.store.SaveTask(ctx, purser.TaskRecord{ID: f.task.ID, RunID: "shared", Workspace: f.workspace, File: f.task.File,
				State: purser.StateRunning, Owner: dead, Budget: f.task.Budget}))
			hold := func(h purser.Holder, tokens int64, named bool) {
				t.Helper()
				_, err := f.store.ReserveRun(ctx, "shared", h, caps, budget.Amount{Tokens: tokens}, time.Hour)
				must(t, err)
				if named {
					_, err = f.store.ReserveNamed(ctx, "team", h, budget.Amount{Tokens: tokens}, time.Now(), time.Hour)
					must(t, err)
				}
			}
			// What the killed process held: all but 100 tokens of both caps.
			hold(purser.Holder{Owner: dead, TaskID: f.task.ID}, 49_700, true)
			hold(purser.Holder{Owner: dead, TaskID: "its-other-task"}, 10, false)
			hold(purser.Holder{Owner: live, TaskID: "a-live-task"}, 200, true)

			o, err := f.engine().Resume(ctx, f.task, nil)
			must(t, err)
			if o.Err != nil || f.state().State != purser.StateDone {
				t.Fatalf("resume: %v, state %s (%q); want DONE without waiting for the dead owner's holds to lapse", o.Err, f.state().State, f.state().Reason)
			}
			if len(f.calls()) == 0 {
				t.Fatal("no call was made: the test proves nothing")
			}
			var said []string
			for _, ev := range f.events {
				if strings.Contains(ev.Message, "released") {
					said = append(said, ev.Message)
				}
			}
			if len(said) != 2 || !strings.Contains(said[0], tc.wantReleased+" on run shared") || !strings.Contains(said[0], dead) ||
				!strings.Contains(said[1], "released 1 hold(s) of 49700 tokens on named budget team") {
				t.Fatalf("the resume said %q; want %q on run shared, 49700 tokens on named budget team, and their owner", said, tc.wantReleased)
			}
			spent, err := f.store.RunUsageTotals(ctx, "shared")
			must(t, err)
			avail, err := f.store.RunAvailable(ctx, "shared", caps)
			must(t, err)
			if held := capTokens - spent.Tokens - avail.Tokens; held != tc.wantOtherHeld {
				t.Fatalf("%d tokens still held on the run, want %d", held, tc.wantOtherHeld)
			}
			st, err := f.store.NamedBudgetStatus(ctx, "team", time.Now())
			must(t, err)
			if st.Held.Tokens != 200 {
				t.Fatalf("%d tokens still held on the named budget, want the live owner's 200", st.Held.Tokens)
			}
		})
	}
}
