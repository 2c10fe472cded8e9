package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// A raise moves a task's recorded cap, is recorded among its budget
// changes, and queues its BLOCKED job again — once; a raise made against a
// budget that moved meanwhile is refused, and a missing task is not found.
func testRaiseTask(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	raiser, ok := any(s).(purser.TaskRaiser)
	if !ok {
		t.Fatalf("%T is no purser.TaskRaiser", s)
	}
	one, three := budget.Dollars(1), budget.Dollars(3)
	iters := 10
	was := budget.Config{Hard: budget.HardLimits{USD: &one, MaxIterations: &iters}}
	to := budget.Config{Hard: budget.HardLimits{USD: &three, MaxIterations: &iters}}
	if err := s.SaveTask(ctx, purser.TaskRecord{ID: "t", RunID: "r", Goal: "g", Workspace: "/w", File: "/w/t.yaml", Budget: was, State: purser.StateBlocked}); err != nil {
		t.Fatal(err)
	}
	q := jobQueue(t, open)
	if _, err := q.SubmitJob(ctx, purser.Job{TaskID: "t", RunID: "r", TaskFile: "/w/t.yaml"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := q.ClaimJob(ctx, "w1", time.Minute); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if err := q.FinishJob(ctx, "t", "w1", string(purser.StateBlocked)); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Truncate(time.Microsecond)
	c := purser.BudgetChange{TaskID: "t", At: at, By: "u@h", Source: purser.TaskRaiseSource + " --usd 3 on h in /home", From: was, To: to}
	requeued, err := raiser.RaiseTask(ctx, c)
	if err != nil || !requeued {
		t.Fatalf("raise of a BLOCKED job: requeued %v, %v; want it queued again", requeued, err)
	}
	rec, err := open(t).Task(ctx, "t")
	if err != nil || *rec.Budget.Hard.USD != three {
		t.Fatalf("the task's recorded budget after the raise: %+v (%v), want hard $3", rec.Budget.Hard, err)
	}
	changes, err := s.BudgetChanges(ctx, "t")
	if err != nil || len(changes) != 1 || changes[0].By != "u@h" || changes[0].Source != c.Source || !changes[0].At.Equal(at) ||
		*changes[0].From.Hard.USD != one || *changes[0].To.Hard.USD != three {
		t.Fatalf("the raise's record: %+v (%v)", changes, err)
	}
	if j, ok, err := q.ClaimJob(ctx, "w2", time.Minute); err != nil || !ok || j.TaskID != "t" {
		t.Fatalf("a worker claiming after the raise: %+v %v %v, want job t", j, ok, err)
	}
	// From a budget read before the first raise: refused, nothing changed.
	if _, err := raiser.RaiseTask(ctx, purser.BudgetChange{TaskID: "t", At: at, By: "v@h", Source: purser.TaskRaiseSource, From: was, To: to}); !errors.Is(err, purser.ErrBudgetMoved) {
		t.Fatalf("a raise from a stale budget: %v, want ErrBudgetMoved", err)
	}
	// The job is leased, not finished BLOCKED: a raise does not queue it.
	five := budget.Dollars(5)
	more := budget.Config{Hard: budget.HardLimits{USD: &five, MaxIterations: &iters}}
	if requeued, err := raiser.RaiseTask(ctx, purser.BudgetChange{TaskID: "t", At: at, By: "u@h", Source: purser.TaskRaiseSource, From: to, To: more}); err != nil || requeued {
		t.Fatalf("raising a task whose job is leased: requeued %v, %v; want the raise alone", requeued, err)
	}
	if changes, _ := s.BudgetChanges(ctx, "t"); len(changes) != 2 {
		t.Fatalf("%d changes recorded, want 2", len(changes))
	}
	if _, err := raiser.RaiseTask(ctx, purser.BudgetChange{TaskID: "nope", From: was, To: to}); !errors.Is(err, purser.ErrNotFound) {
		t.Fatalf("raising a missing task: %v, want ErrNotFound", err)
	}
}
