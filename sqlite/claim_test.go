package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// Two processes starting the same task at once: exactly one claims it. Each
// claimer has a connection of its own to the same file, as separate
// processes do.
func TestClaimTaskIsAtomic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.db")
	const claimers = 8
	stores := make([]interface {
		ClaimTask(context.Context, purser.TaskRecord, func(string) bool) error
	}, claimers)
	for i := range stores {
		stores[i] = open(t, path)
	}
	alive := func(string) bool { return false } // every owner is alive
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won int
	var claimed []*purser.TaskClaimedError
	start := make(chan struct{})
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			err := s.ClaimTask(context.Background(), purser.TaskRecord{ID: "t", State: purser.StateRunning, Owner: fmt.Sprintf("host %d 1", i)}, alive)
			mu.Lock()
			defer mu.Unlock()
			var ce *purser.TaskClaimedError
			switch {
			case err == nil:
				won++
			case errors.As(err, &ce):
				claimed = append(claimed, ce)
			default:
				t.Errorf("claimer %d: %v", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if won != 1 || len(claimed) != claimers-1 {
		t.Fatalf("%d claimers won and %d were refused; want exactly one winner", won, len(claimed))
	}
}

func TestClaimTaskTakesOverAGoneOwnerAndKeepsItsOwn(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "p.db"))
	rec := purser.TaskRecord{ID: "t", State: purser.StateRunning, Owner: "host 1 1"}
	if err := s.ClaimTask(ctx, rec, func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	// The same owner claiming again (a resume in the same process) is fine.
	if err := s.ClaimTask(ctx, rec, func(string) bool { return false }); err != nil {
		t.Fatalf("claim by its own owner: %v", err)
	}
	other := rec
	other.Owner = "host 2 1"
	var ce *purser.TaskClaimedError
	if err := s.ClaimTask(ctx, other, func(string) bool { return false }); !errors.As(err, &ce) || ce.Owner != "host 1 1" {
		t.Fatalf("claim of a task a live owner runs: %v", err)
	}
	if err := s.ClaimTask(ctx, other, func(o string) bool { return o == "host 1 1" }); err != nil {
		t.Fatalf("claim of a task whose owner is gone: %v", err)
	}
	got, err := s.Task(ctx, "t")
	if err != nil || got.Owner != "host 2 1" {
		t.Fatalf("owner %q (%v), want host 2 1", got.Owner, err)
	}
	// A stopped task is claimed whoever stopped it.
	if err := s.SetTaskState(ctx, "t", purser.StateBlocked, "cap"); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimTask(ctx, rec, func(string) bool { return false }); err != nil {
		t.Fatalf("claim of a BLOCKED task: %v", err)
	}
}

func TestJoinRunKeepsTheFirstBudget(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "p.db"))
	tokens := func(n int64) *budget.Config {
		return &budget.Config{Hard: budget.HardLimits{Tokens: &n}}
	}
	first, err := s.JoinRun(ctx, purser.Run{ID: "shared", Budget: tokens(40_000)})
	if err != nil || first.Budget == nil || *first.Budget.Hard.Tokens != 40_000 {
		t.Fatalf("first join: %+v, %v", first, err)
	}
	second, err := s.JoinRun(ctx, purser.Run{ID: "shared", Budget: tokens(400_000)})
	if err != nil || second.Budget == nil || *second.Budget.Hard.Tokens != 40_000 {
		t.Fatalf("second join replaced the run's budget: %+v, %v", second, err)
	}
}

func TestRunElapsedNeverGoesBack(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "p.db"))
	if err := s.SaveRun(ctx, purser.Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{3 * time.Second, time.Second, 5 * time.Second, 4 * time.Second} {
		if err := s.SaveRunElapsed(ctx, "r", d); err != nil {
			t.Fatal(err)
		}
	}
	run, err := s.Run(ctx, "r")
	if err != nil || run.Elapsed != 5*time.Second {
		t.Fatalf("run elapsed %s (%v), want the largest saved, 5s", run.Elapsed, err)
	}
}

func TestBudgetChangesAreKept(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "p.db"))
	one, thousand := budget.USD(1_000_000_000), budget.USD(1000_000_000_000)
	c := purser.BudgetChange{TaskID: "t", At: time.Unix(100, 0), By: "ann@box", Source: "/home/ann/raise.yaml",
		From: budget.Config{Hard: budget.HardLimits{USD: &one}}, To: budget.Config{Hard: budget.HardLimits{USD: &thousand}}}
	if err := s.SaveBudgetChange(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := s.BudgetChanges(ctx, "t")
	if err != nil || len(got) != 1 {
		t.Fatalf("changes %+v, %v", got, err)
	}
	if g := got[0]; g.By != c.By || g.Source != c.Source || !g.At.Equal(c.At) || *g.From.Hard.USD != one || *g.To.Hard.USD != thousand {
		t.Fatalf("change read back as %+v", g)
	}
}
