package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/sqlite"
)

func open(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestLedgerIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "p.db"))
	e := purser.LedgerEntry{Key: "call-1/1", TaskID: "t", CallID: "call-1", Event: budget.UsageEvent{InputTokens: 10, USD: 100, CostSource: budget.CostReported}}
	for range 3 {
		if err := s.AppendUsage(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	e.Key, e.Event.CostSource = "call-1/2", budget.CostUnknown
	if err := s.AppendUsage(ctx, e); err != nil {
		t.Fatal(err)
	}
	tot, err := s.UsageTotals(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if tot.Tokens != 20 || tot.USD != 100 || tot.ReportedEvents != 1 || tot.UnknownEvents != 1 || tot.USDSource() != budget.SourcePartial {
		t.Fatalf("totals = %+v", tot)
	}
	if err := s.AppendUsage(ctx, purser.LedgerEntry{TaskID: "t"}); err == nil {
		t.Fatal("an entry without an idempotency key was accepted")
	}
}

func TestConcurrentAppendsLoseNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "p.db"))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				key := string(rune('a'+w)) + "/" + string(rune('0'+i/10)) + string(rune('0'+i%10))
				if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: key, TaskID: "t", Event: budget.UsageEvent{OutputTokens: 1}}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	tot, _ := s.UsageTotals(ctx, "t")
	if tot.Tokens != 400 {
		t.Fatalf("%d tokens recorded, want 400", tot.Tokens)
	}
}

func TestTaskRoundTripAndReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "p.db")
	s := open(t, path)
	usd := budget.Dollars(3)
	iters := 4
	rec := purser.TaskRecord{ID: "t1", RunID: "r", Goal: "g", Budget: budget.Config{Hard: budget.HardLimits{USD: &usd, MaxIterations: &iters}}, State: purser.StateRunning}
	if err := s.SaveTask(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTaskState(ctx, "t1", purser.StateBlocked, "cap"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := open(t, path) // migrations run once
	got, err := s2.Task(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != purser.StateBlocked || got.Reason != "cap" || *got.Budget.Hard.USD != usd || *got.Budget.Hard.MaxIterations != 4 || got.Budget.Hard.Tokens != nil {
		t.Fatalf("got %+v", got)
	}
	if _, err := s2.Task(ctx, "nope"); !errors.Is(err, purser.ErrNotFound) {
		t.Fatalf("missing task: %v", err)
	}
	if err := s2.SetTaskState(ctx, "nope", purser.StateDone, ""); !errors.Is(err, purser.ErrNotFound) {
		t.Fatalf("state of a missing task: %v", err)
	}
}

func TestDatabaseIsOwnerOnly(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), ".purser")
	open(t, filepath.Join(dir, "purser.db"))
	for p, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "purser.db"): 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
}

// The running totals always equal a full sum over the ledger, duplicates and
// batches included, per task and per run.
func TestRunningTotalsMatchTheLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "p.db"))
	var batch []purser.LedgerEntry
	for i := range 300 {
		src := []budget.CostSource{budget.CostReported, budget.CostEstimated, budget.CostUnknown, budget.CostNone}[i%4]
		e := purser.LedgerEntry{Key: "k" + string(rune('a'+i%26)) + string(rune('a'+i/26)), TaskID: []string{"t1", "t2"}[i%2], RunID: "r",
			CallID: "c", Event: budget.UsageEvent{InputTokens: int64(i), OutputTokens: 1, USD: budget.USD(i * 1000), CostSource: src, IterationEnd: i%10 == 0}}
		batch = append(batch, e)
		if len(batch) == 7 {
			if err := s.AppendUsage(ctx, append(batch, batch[0])...); err != nil { // a duplicate in every batch
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := s.AppendUsage(ctx, batch...); err != nil {
		t.Fatal(err)
	}
	var run budget.Totals
	for _, task := range []string{"t1", "t2"} {
		entries, err := s.Usage(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		var want budget.Totals
		for _, e := range entries {
			want.Add(e.Event)
			run.Add(e.Event)
		}
		want.Time = 0
		got, err := s.UsageTotals(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("task %s: running totals %+v, ledger sum %+v", task, got, want)
		}
	}
	run.Time = 0
	if got, _ := s.RunUsageTotals(ctx, "r"); got != run {
		t.Errorf("run: running totals %+v, ledger sum %+v", got, run)
	}
}

// Several processes (here, stores) opening a new database at the same moment
// migrate it once, without errors.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "new.db")
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := sqlite.Open(context.Background(), path)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
	}
}
