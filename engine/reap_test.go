package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/engine"
)

// Issue 22 item 14: a call waiting for room on a shared run drops the holds
// of a holder that is gone — its process (on this host), or its job's
// lease (on any host) — instead of waiting out their TTL (an hour here);
// it says whose holds it released and why. A live holder's holds are
// waited for: the test's short context then ends the wait, with the holds
// still there.
func TestWaitingCallDropsTheHoldsOfGoneHolders(t *testing.T) {
	const holder = "host-a 4242 777"
	for _, tc := range []struct {
		name        string
		processGone bool          // the holder's process is known dead
		lease       time.Duration // the holder's job's lease on its task (0: no job)
		wantSaid    string        // "": the call must wait
	}{
		{"its process is gone", true, 0, "its process is gone"},
		{"its job's lease ran out (another host)", false, time.Nanosecond, "its job's lease ran out"},
		{"alive, its lease running: the call waits", false, time.Hour, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "steps:\n  - usage: {inputTokens: 100}\n    files: {src/fixed: yes}\n")
			timeout := 60 * time.Second
			if tc.wantSaid == "" {
				timeout = 2 * time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			f.cfg.Owners = holdOwners{fakeOwners: fakeOwners{alive: map[string]bool{holder: !tc.processGone}}, processGone: tc.processGone}
			f.cfg.Shared, f.cfg.Named = f.store, f.store
			capTokens := int64(50_000)
			caps := budget.Amount{USD: budget.UnlimitedUSD, Tokens: capTokens}
			if tc.lease > 0 {
				_, err := f.store.SubmitJob(ctx, purser.Job{TaskID: "its-task", RunID: "shared", TaskFile: "/x/its-task.yaml"})
				must(t, err)
				_, ok, err := f.store.ClaimJob(ctx, holder, tc.lease)
				must(t, err)
				if !ok {
					t.Fatal("the holder's job was not granted")
				}
			}
			runBudget := &budget.Config{Hard: budget.HardLimits{Tokens: &capTokens, MaxIterations: ptr(10)}}
			must(t, f.store.SaveRun(ctx, purser.Run{ID: "shared", Budget: runBudget}))
			// What the holder's call holds: all but 100 tokens of the cap.
			_, err := f.store.ReserveRun(ctx, "shared", purser.Holder{Owner: holder, TaskID: "its-task"}, caps, budget.Amount{Tokens: 49_900}, time.Hour)
			must(t, err)

			outcomes, err := f.engine().RunBatch(ctx, engine.Batch{Tasks: []purser.Task{f.task}, Parallel: 1, Name: "shared", Budget: runBudget})
			must(t, err)
			var said []string
			f.mu.Lock()
			for _, ev := range f.events {
				if strings.Contains(ev.Message, "released") {
					said = append(said, ev.Message)
				}
			}
			f.mu.Unlock()
			avail, aerr := f.store.RunAvailable(context.Background(), "shared", caps)
			must(t, aerr)
			if tc.wantSaid == "" {
				if !errors.Is(outcomes[0].Err, engine.ErrInterrupted) || len(f.calls()) != 0 {
					t.Fatalf("outcome %v with %d calls, want the call to wait for the live holder until interrupted", outcomes[0].Err, len(f.calls()))
				}
				if len(said) != 0 || avail.Tokens != 100 {
					t.Fatalf("a live holder's holds were released (%q; %d tokens free)", said, avail.Tokens)
				}
				return
			}
			if outcomes[0].Err != nil || f.state().State != purser.StateDone {
				t.Fatalf("outcome %v, state %s (%q); want DONE without waiting out the gone holder's hold", outcomes[0].Err, f.state().State, f.state().Reason)
			}
			if len(said) != 1 || !strings.Contains(said[0], tc.wantSaid) || !strings.Contains(said[0], "released 1 hold(s) of 49900 tokens on run shared") ||
				!strings.Contains(said[0], holder) {
				t.Errorf("said %q, want one release of the 49900 tokens %s held, saying %q", said, holder, tc.wantSaid)
			}
		})
	}
}
