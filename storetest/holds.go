package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// A dead owner's holds are dropped by another handle (another process): on
// the run and on the named budget, only that owner's, only for the task
// asked (every task of its with no task), with what they held said; a live
// owner's holds and holds placed with no holder stay.
func testDeadOwnersHoldsAreDropped(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	if err := s.CreateBudget(ctx, purser.NamedBudget{Name: "team", Window: purser.WindowMonth, Budget: capped(budget.Dollars(10), 100_000)}); err != nil {
		t.Fatal(err)
	}
	caps := budget.Amount{USD: budget.Dollars(10), Tokens: 100_000}
	now := time.Now()
	dead := "host-a 4242 777"
	hold := func(h purser.Holder, tokens int64, ttl time.Duration, named bool) {
		t.Helper()
		want := budget.Amount{USD: budget.USD(tokens) * 1000, Tokens: tokens}
		if _, err := s.ReserveRun(ctx, "r", h, caps, want, ttl); err != nil {
			t.Fatal(err)
		}
		if named {
			if _, err := s.ReserveNamed(ctx, "team", h, want, now, ttl); err != nil {
				t.Fatal(err)
			}
		}
	}
	hold(purser.Holder{Owner: dead, TaskID: "t1"}, 1000, time.Hour, true)
	hold(purser.Holder{Owner: dead, TaskID: "t1"}, 200, time.Hour, false)
	hold(purser.Holder{Owner: dead, TaskID: "t1"}, 5, time.Nanosecond, true) // lapsed already: dropped, not counted
	hold(purser.Holder{Owner: dead, TaskID: "t2"}, 30, time.Hour, true)
	hold(purser.Holder{Owner: "host-b 1 1", TaskID: "t1"}, 4000, time.Hour, true) // alive: another host's, leased
	hold(purser.Holder{}, 50_000, time.Hour, false)                               // no holder: only lapses

	other := open(t)
	dropper, ok := other.(purser.HoldDropper)
	if !ok {
		t.Fatalf("%T is no purser.HoldDropper", other)
	}
	got, err := dropper.DropHolds(ctx, dead, "t1")
	if err != nil {
		t.Fatal(err)
	}
	want := []purser.DroppedHolds{
		{Scope: budget.ScopeRun, Name: "r", Holds: 2, Held: budget.Amount{USD: 1_200_000, Tokens: 1200}},
		{Scope: budget.ScopeNamed, Name: "team", Holds: 1, Held: budget.Amount{USD: 1_000_000, Tokens: 1000}},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("dropped for task t1: %+v, want %+v", got, want)
	}
	heldRun := func() int64 {
		t.Helper()
		avail, err := other.RunAvailable(ctx, "r", caps)
		if err != nil {
			t.Fatal(err)
		}
		return caps.Tokens - avail.Tokens
	}
	heldNamed := func() int64 {
		t.Helper()
		st, err := other.NamedBudgetStatus(ctx, "team", now)
		if err != nil {
			t.Fatal(err)
		}
		return st.Held.Tokens
	}
	if h := heldRun(); h != 30+4000+50_000 {
		t.Fatalf("run r holds %d tokens after dropping the dead owner's t1 holds, want %d (its t2, the live owner's, the holder-less)", h, 30+4000+50_000)
	}
	if h := heldNamed(); h != 30+4000 {
		t.Fatalf("team holds %d tokens, want %d", h, 30+4000)
	}
	// Again: nothing left to drop for t1.
	if got, err := dropper.DropHolds(ctx, dead, "t1"); err != nil || len(got) != 0 {
		t.Fatalf("dropping t1's holds twice: %+v (%v), want none the second time", got, err)
	}
	// No task: every hold of the owner's.
	got, err = dropper.DropHolds(ctx, dead, "")
	want = []purser.DroppedHolds{
		{Scope: budget.ScopeRun, Name: "r", Holds: 1, Held: budget.Amount{USD: 30_000, Tokens: 30}},
		{Scope: budget.ScopeNamed, Name: "team", Holds: 1, Held: budget.Amount{USD: 30_000, Tokens: 30}},
	}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("dropped for every task: %+v (%v), want %+v", got, err, want)
	}
	// No owner: nothing, not the holder-less holds.
	if got, err := dropper.DropHolds(ctx, "", ""); err != nil || len(got) != 0 {
		t.Fatalf("dropping with no owner: %+v (%v), want nothing", got, err)
	}
	if h := heldRun(); h != 4000+50_000 {
		t.Fatalf("run r holds %d tokens, want %d (the live owner's and the holder-less)", h, 4000+50_000)
	}
	if h := heldNamed(); h != 4000 {
		t.Fatalf("team holds %d tokens, want the live owner's 4000", h)
	}
}

// Issue 22 item 14: a waiting call finds who holds the room it waits for,
// and the holds of a worker whose job's lease ran out are dropped by any
// handle, on runs and named budgets, with their owner said: only for the
// task of that job, not a live lease's, not a task with no job (a purser
// run on some host: only its TTL ends it), not a holder-less or expired
// hold.
func testLapsedLeasesHoldsAreReaped(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	if err := s.CreateBudget(ctx, purser.NamedBudget{Name: "team", Window: purser.WindowMonth, Budget: capped(budget.Dollars(10), 100_000)}); err != nil {
		t.Fatal(err)
	}
	caps := budget.Amount{USD: budget.Dollars(10), Tokens: 100_000}
	now := time.Now()
	dead, alive := "host-a 1 1", "host-b 2 2"
	q := jobQueue(t, open)
	for _, c := range []struct {
		task, worker string
		lease        time.Duration
	}{{"t2", alive, time.Hour}, {"t1", dead, time.Nanosecond}} {
		if _, err := q.SubmitJob(ctx, purser.Job{TaskID: c.task, RunID: "r", TaskFile: "/shared/" + c.task + ".yaml"}); err != nil {
			t.Fatal(err)
		}
		if j, ok, err := q.ClaimJob(ctx, c.worker, c.lease); err != nil || !ok || j.TaskID != c.task {
			t.Fatalf("claim of %s by %s: %+v %v %v", c.task, c.worker, j, ok, err)
		}
	}
	hold := func(h purser.Holder, tokens int64, ttl time.Duration, named bool) {
		t.Helper()
		want := budget.Amount{USD: budget.USD(tokens) * 1000, Tokens: tokens}
		if _, err := s.ReserveRun(ctx, "r", h, caps, want, ttl); err != nil {
			t.Fatal(err)
		}
		if named {
			if _, err := s.ReserveNamed(ctx, "team", h, want, now, ttl); err != nil {
				t.Fatal(err)
			}
		}
	}
	hold(purser.Holder{Owner: dead, TaskID: "t1"}, 8300, time.Hour, true)     // its lease ran out: dropped
	hold(purser.Holder{Owner: dead, TaskID: "t1"}, 7, time.Nanosecond, false) // expired already: not counted
	hold(purser.Holder{Owner: dead, TaskID: "t9"}, 20, time.Hour, true)       // no job: stays
	hold(purser.Holder{Owner: alive, TaskID: "t2"}, 400, time.Hour, true)     // a live lease: stays
	hold(purser.Holder{}, 50_000, time.Hour, false)                           // no holder: only lapses

	other := open(t)
	reaper, ok := other.(purser.HoldReaper)
	if !ok {
		t.Fatalf("%T is no purser.HoldReaper", other)
	}
	holders, err := reaper.Holders(ctx)
	wantHolders := []purser.Holder{{Owner: dead, TaskID: "t1"}, {Owner: dead, TaskID: "t9"}, {Owner: alive, TaskID: "t2"}}
	if err != nil || !slices.Equal(holders, wantHolders) {
		t.Fatalf("holders %+v (%v), want %+v", holders, err, wantHolders)
	}
	got, err := reaper.DropLapsedHolds(ctx)
	want := []purser.DroppedHolds{
		{Owner: dead, Scope: budget.ScopeRun, Name: "r", Holds: 1, Held: budget.Amount{USD: 8_300_000, Tokens: 8300}},
		{Owner: dead, Scope: budget.ScopeNamed, Name: "team", Holds: 1, Held: budget.Amount{USD: 8_300_000, Tokens: 8300}},
	}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("dropped %+v (%v), want %+v", got, err, want)
	}
	if got, err := reaper.DropLapsedHolds(ctx); err != nil || len(got) != 0 {
		t.Fatalf("dropping twice: %+v (%v), want nothing the second time", got, err)
	}
	holders, err = reaper.Holders(ctx)
	wantHolders = []purser.Holder{{Owner: dead, TaskID: "t9"}, {Owner: alive, TaskID: "t2"}}
	if err != nil || !slices.Equal(holders, wantHolders) {
		t.Fatalf("holders after the drop %+v (%v), want %+v", holders, err, wantHolders)
	}
	avail, err := other.RunAvailable(ctx, "r", caps)
	if err != nil {
		t.Fatal(err)
	}
	if h := caps.Tokens - avail.Tokens; h != 20+400+50_000 {
		t.Fatalf("run r holds %d tokens, want %d", h, 20+400+50_000)
	}
	st, err := other.NamedBudgetStatus(ctx, "team", now)
	if err != nil {
		t.Fatal(err)
	}
	if st.Held.Tokens != 20+400 {
		t.Fatalf("team holds %d tokens, want %d", st.Held.Tokens, 20+400)
	}
}
