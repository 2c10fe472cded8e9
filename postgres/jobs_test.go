package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
)

// Workers on separate pools claiming at once from one queue: every job is
// granted to exactly one of them, and none is left behind.
func TestClaimJobGrantsEachJobOnce(t *testing.T) {
	dbURL := newSchema(t)
	ctx := context.Background()
	submitter := open(t, dbURL)
	const jobs, workers = 30, 6
	for i := range jobs {
		ok, err := submitter.SubmitJob(ctx, purser.Job{TaskID: fmt.Sprintf("t%02d", i), RunID: "r", TaskFile: "/shared/t.yaml"})
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
		s := open(t, dbURL)
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
				if other, dup := granted[j.TaskID]; dup {
					t.Errorf("job %s granted to %s and %s", j.TaskID, other, name)
				}
				granted[j.TaskID] = name
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(granted) != jobs {
		t.Fatalf("%d of %d jobs granted", len(granted), jobs)
	}
}

// A worker that stops renewing loses its job once the lease runs out: the
// next claim grants it anew, naming the worker that lost it, and the old
// worker can neither renew nor finish it.
func TestLeaseRunsOutAndTheJobGoesToAnotherWorker(t *testing.T) {
	dbURL := newSchema(t)
	ctx := context.Background()
	a, b := open(t, dbURL), open(t, dbURL)
	if _, err := a.SubmitJob(ctx, purser.Job{TaskID: "t", RunID: "r", TaskFile: "/shared/t.yaml"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.ClaimJob(ctx, "A", 300*time.Millisecond); err != nil || !ok {
		t.Fatalf("first claim: %v %v", ok, err)
	}
	if _, ok, _ := b.ClaimJob(ctx, "B", time.Minute); ok {
		t.Fatal("a leased job was granted while its lease ran")
	}
	var j purser.Job
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		var err error
		if j, ok, err = b.ClaimJob(ctx, "B", time.Minute); err != nil {
			t.Fatal(err)
		} else if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease never ran out")
		}
		time.Sleep(50 * time.Millisecond)
	}
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
}
