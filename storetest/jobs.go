package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
)

// jobQueue opens a handle on the database as a purser.JobQueue, failing the
// test when the store has no queue.
func jobQueue(t *testing.T, open Opener) purser.JobQueue {
	t.Helper()
	s := open(t)
	q, ok := s.(purser.JobQueue)
	if !ok {
		t.Fatalf("%T is no purser.JobQueue", s)
	}
	return q
}

// Workers on separate handles (as separate processes would be) claiming at
// once from one queue: every job is granted to exactly one of them, and
// none is left behind; the listing then shows each leased once, in the
// order submitted.
func testClaimJobGrantsEachJobOnce(t *testing.T, open Opener) {
	ctx := t.Context()
	submitter := jobQueue(t, open)
	const jobs, workers = 30, 6
	var want []string
	for i := range jobs {
		id := fmt.Sprintf("t%02d", i)
		want = append(want, id)
		ok, err := submitter.SubmitJob(ctx, purser.Job{TaskID: id, RunID: "r", TaskFile: "/shared/t.yaml"})
		if err != nil || !ok {
			t.Fatalf("submit: %v %v", ok, err)
		}
	}
	if ok, err := submitter.SubmitJob(ctx, purser.Job{TaskID: "t00", RunID: "r", TaskFile: "/x"}); err != nil || ok {
		t.Fatalf("a task submitted twice was queued again (%v, %v)", ok, err)
	}
	var mu sync.Mutex
	granted := map[string]string{}
	var wg sync.WaitGroup
	for w := range workers {
		s := jobQueue(t, open)
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("w%d", w)
			for {
				j, ok, err := s.ClaimJob(ctx, name, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				other, dup := granted[j.TaskID]
				granted[j.TaskID] = name
				mu.Unlock()
				if dup {
					t.Errorf("job %s granted to %s and %s", j.TaskID, other, name)
					return // a queue that grants twice may never run dry
				}
				if j.Attempts != 1 || j.LeaseLost != "" || j.State != purser.JobLeased || j.Worker != name {
					t.Errorf("first grant of %s: %+v, want leased to %s, attempt 1, no lease lost", j.TaskID, j, name)
				}
			}
		}()
	}
	wg.Wait()
	if len(granted) != jobs {
		t.Fatalf("%d of %d jobs granted", len(granted), jobs)
	}
	listed, err := submitter.Jobs(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range listed {
		ids = append(ids, j.TaskID)
		if j.State != purser.JobLeased || j.Worker != granted[j.TaskID] || j.Attempts != 1 || j.TaskFile != "/shared/t.yaml" {
			t.Errorf("listed %+v, want leased to %s, attempt 1, its first task file", j, granted[j.TaskID])
		}
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("jobs listed %v, want the order submitted %v", ids, want)
	}
}

// A worker that stops renewing loses its job once the lease runs out: the
// next claim grants it anew, naming the worker that lost it, and the old
// worker can neither renew nor finish it.
func testLeaseRunsOutAndTheJobGoesToAnotherWorker(t *testing.T, open Opener) {
	ctx := t.Context()
	a, b := jobQueue(t, open), jobQueue(t, open)
	if _, err := a.SubmitJob(ctx, purser.Job{TaskID: "t", RunID: "r", TaskFile: "/shared/t.yaml"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.ClaimJob(ctx, "A", 300*time.Millisecond); err != nil || !ok {
		t.Fatalf("first claim: %v %v", ok, err)
	}
	if _, ok, _ := b.ClaimJob(ctx, "B", time.Minute); ok {
		t.Fatal("a leased job was granted while its lease ran")
	}
	j := claimWhenDue(t, b, "B", time.Minute)
	if j.LeaseLost != "A" || j.Attempts != 2 || j.TaskFile != "/shared/t.yaml" {
		t.Fatalf("regranted job: %+v, want lease lost by A, attempt 2", j)
	}
	for what, err := range map[string]error{
		"renew":   a.RenewLease(ctx, "t", "A", time.Minute),
		"finish":  a.FinishJob(ctx, "t", "A", "DONE"),
		"release": a.ReleaseJob(ctx, "t", "A", 0),
	} {
		if !errors.Is(err, purser.ErrLeaseLost) {
			t.Errorf("%s by the worker that lost the lease: %v, want ErrLeaseLost", what, err)
		}
	}
	if err := b.RenewLease(ctx, "t", "B", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.FinishJob(ctx, "t", "B", "DONE"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.ClaimJob(ctx, "A", time.Minute); ok {
		t.Fatal("a finished job was granted")
	}
	got, err := a.Jobs(ctx, "r")
	if err != nil || len(got) != 1 || got[0].State != purser.JobFinished || got[0].Outcome != "DONE" || got[0].Worker != "B" {
		t.Fatalf("jobs: %+v %v", got, err)
	}
	if err := b.FinishJob(ctx, "t", "B", "DONE"); !errors.Is(err, purser.ErrLeaseLost) {
		t.Fatalf("finishing a finished job: %v, want ErrLeaseLost", err)
	}
}

// A lease that ran out but that nobody claimed since is still its worker's:
// it renews it and the job is not granted to another.
func testExpiredLeaseNobodyTookIsRenewed(t *testing.T, open Opener) {
	ctx := t.Context()
	a, b := jobQueue(t, open), jobQueue(t, open)
	if _, err := a.SubmitJob(ctx, purser.Job{TaskID: "t", RunID: "r", TaskFile: "/f"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.ClaimJob(ctx, "A", time.Millisecond); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	time.Sleep(20 * time.Millisecond) // the lease has run out: 1 ms
	if err := a.RenewLease(ctx, "t", "A", time.Minute); err != nil {
		t.Fatalf("renewing a lease that ran out, untaken: %v", err)
	}
	if j, ok, err := b.ClaimJob(ctx, "B", time.Minute); err != nil || ok {
		t.Fatalf("a renewed job was granted to another: %+v %v %v", j, ok, err)
	}
	if err := b.RenewLease(ctx, "t", "B", time.Minute); !errors.Is(err, purser.ErrLeaseLost) {
		t.Fatalf("a worker renewing a job it never held: %v, want ErrLeaseLost", err)
	}
	if err := b.FinishJob(ctx, "nope", "B", "DONE"); !errors.Is(err, purser.ErrLeaseLost) {
		t.Fatalf("finishing a job never submitted: %v, want ErrLeaseLost", err)
	}
}

// A job given back waits out its after before anyone can claim it again,
// keeps its place (older jobs first), counts a new attempt and names no lost
// lease (it was given back, not lost); Jobs lists a run's jobs or, with "",
// every run's, in the order submitted.
func testReleaseJobWaitsItsAfter(t *testing.T, open Opener) {
	ctx := t.Context()
	a, b := jobQueue(t, open), jobQueue(t, open)
	for _, j := range []purser.Job{
		{TaskID: "later", RunID: "r1", TaskFile: "/later"},
		{TaskID: "soon", RunID: "r2", TaskFile: "/soon"},
		{TaskID: "now", RunID: "r1", TaskFile: "/now"},
		{TaskID: "fresh", RunID: "r2", TaskFile: "/fresh"},
	} {
		if _, err := a.SubmitJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"later", "soon", "now"} {
		j, ok, err := a.ClaimJob(ctx, "A", time.Minute)
		if err != nil || !ok || j.TaskID != want {
			t.Fatalf("claim: %+v %v %v, want the oldest, %s", j, ok, err, want)
		}
	}
	const soon = 300 * time.Millisecond
	released := time.Now()
	for task, after := range map[string]time.Duration{"later": time.Hour, "soon": soon, "now": 0} {
		if err := a.ReleaseJob(ctx, task, "A", after); err != nil {
			t.Fatal(err)
		}
	}
	// Given back at once, "now" is older than "fresh": it comes first.
	for _, want := range []string{"now", "fresh"} {
		j, ok, err := b.ClaimJob(ctx, "B", time.Minute)
		if err != nil || !ok || j.TaskID != want {
			t.Fatalf("claim after the releases: %+v %v %v, want %s", j, ok, err, want)
		}
		if want == "now" && (j.Attempts != 2 || j.LeaseLost != "") {
			t.Fatalf("a job given back, claimed again: %+v, want attempt 2 and no lease lost", j)
		}
	}
	j := claimWhenDue(t, b, "B", time.Minute)
	if j.TaskID != "soon" || j.Attempts != 2 || j.LeaseLost != "" {
		t.Fatalf("claimed %+v, want soon, attempt 2, no lease lost", j)
	}
	if waited := time.Since(released); waited < soon {
		t.Fatalf("a job given back for %s was claimed again %s later", soon, waited)
	}
	if j, ok, err := b.ClaimJob(ctx, "B", time.Minute); err != nil || ok {
		t.Fatalf("a job given back for an hour was claimed: %+v %v %v", j, ok, err)
	}
	ids := func(runID string) []string {
		t.Helper()
		jobs, err := b.Jobs(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range jobs {
			out = append(out, j.TaskID+"/"+string(j.State))
		}
		return out
	}
	for run, want := range map[string][]string{
		"r1": {"later/queued", "now/leased"},
		"r2": {"soon/leased", "fresh/leased"},
		"":   {"later/queued", "soon/leased", "now/leased", "fresh/leased"},
		"r3": nil,
	} {
		if got := ids(run); !slices.Equal(got, want) {
			t.Errorf("jobs of run %q: %v, want %v", run, got, want)
		}
	}
}

// claimWhenDue claims for worker until a job is granted, polling, and fails
// if none is within a generous 30 s.
func claimWhenDue(t *testing.T, q purser.JobQueue, worker string, lease time.Duration) purser.Job {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		j, ok, err := q.ClaimJob(context.Background(), worker, lease)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatal("no job became claimable in 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
