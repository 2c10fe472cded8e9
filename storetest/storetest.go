// Package storetest is the conformance suite every purser.Store must pass:
// one set of behaviours (ledger idempotency, running totals, task states and
// owners, atomic claims, shared run budgets, interrupted calls, the job
// queue, …) run
// against each implementation, so that the stores cannot drift apart.
//
// A store package runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Opener { … })
//	}
package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// Store is what the suite tests: a purser.Store that also admits calls
// against a run budget shared through it.
type Store interface {
	purser.Store
	purser.SharedRunBudget
	purser.NamedBudgets
	purser.AlertOutbox
}

// Opener opens a new handle on one database. Every call returns a store of
// its own (its own connections), as a separate process would have; the
// opener closes it when the test ends.
type Opener func(t *testing.T) Store

// Run runs the suite. newDatabase makes a fresh, empty database for one
// test and returns how to open handles on it; tests may run in parallel, so
// each database must be its own.
func Run(t *testing.T, newDatabase func(t *testing.T) Opener) {
	tests := []struct {
		name string
		test func(t *testing.T, open Opener)
	}{
		{"LedgerIsIdempotent", testLedgerIsIdempotent},
		{"LedgerEntryRoundTrip", testLedgerEntryRoundTrip},
		{"ConcurrentAppendsFromSeveralHandlesLoseNothing", testConcurrentAppends},
		{"RunningTotalsMatchTheLedger", testRunningTotalsMatchTheLedger},
		{"CallUsageIsTheLedgerSummedPerCallAndModel", testCallUsage},
		{"CallUsageKeepsEachSubAgentApart", testCallUsagePerAgent},
		{"ListDollarsAreKeptApartFromMoneySpent", testListDollars},
		{"PriceSourcesSumWhatEachTablePriced", testPriceSources},
		{"TaskRoundTripAcrossHandles", testTaskRoundTrip},
		{"MissingTaskRunAndArtifactAreNotFound", testNotFound},
		{"ClaimTaskIsAtomicAcrossHandles", testClaimTaskIsAtomic},
		{"ClaimTaskTakesOverAGoneOwnerAndKeepsItsOwn", testClaimTaskOwners},
		{"SaveRunReplacesTheBudgetJoinRunKeepsTheFirst", testRuns},
		{"RunElapsedNeverGoesBack", testRunElapsedNeverGoesBack},
		{"IterationsRoundTripAndUpdate", testIterations},
		{"InterruptedCallReadsBackWithoutEnd", testCalls},
		{"DegradesRoundTrip", testDegrades},
		{"BudgetChangesAreKept", testBudgetChanges},
		{"ArtifactsAreReplaced", testArtifacts},
		{"SharedRunCountsSpendAndHolds", testSharedRunCountsSpendAndHolds},
		{"SharedRunHoldsNeverJointlyExceedTheCaps", testSharedRunUnderConcurrency},
		{"SharedRunHoldExpiresAfterItsTTL", testSharedRunHoldExpires},
		{"SharedRunHoldsComeBackHoweverTheyEnd", testSharedRunHoldsComeBackHoweverTheyEnd},
		{"NamedBudgetCountsOnlyItsRunsInsideTheWindow", testNamedBudgetWindows},
		{"NamedBudgetHoldsNeverJointlyExceedTheCaps", testNamedBudgetUnderConcurrency},
		{"NamedBudgetCreateRaiseAndDraw", testNamedBudgetLifecycle},
		{"NamedBudgetTreeCountsEachLevelInItsWindowAndRefusesLoops", testNamedBudgetTree},
		{"NamedBudgetTreeHoldsOnEveryAncestorOrNone", testNamedBudgetTreeHoldsAllOrNone},
		{"NamedBudgetTreeHoldsAcrossSiblingsNeverPassTheRoot", testNamedBudgetTreeUnderConcurrency},
		{"NamedHoldsSeeChangesFromAnotherHandle", testNamedHoldsSeeChangesFromAnotherHandle},
		{"WarmNamedHoldsNeverPassTheCap", testWarmNamedHoldsNeverPassTheCap},
		{"NamedUsageCopiesCountOnceForTheBudgetAndItsAncestors", testNamedUsageCountsCopiesOnce},
		{"RaiseTaskMovesTheCapRecordsItAndQueuesABlockedJobAgain", testRaiseTask},
		{"DeadOwnersHoldsAreDropped", testDeadOwnersHoldsAreDropped},
		{"LapsedLeasesHoldsAreReaped", testLapsedLeasesHoldsAreReaped},
		{"AlertOutboxHoldsClaimsSettlesAndExpires", testAlertOutboxLifecycle},
		{"AlertClaimsOnSeveralHandlesAreExclusive", testAlertClaimsAreExclusive},
		{"SettledAlertsAreDeletedOnceOld", testSettledAlertsAreDeleted},
		{"ClaimJobGrantsEachJobOnceAcrossHandles", testClaimJobGrantsEachJobOnce},
		{"LeaseRunsOutAndTheJobGoesToAnotherWorker", testLeaseRunsOutAndTheJobGoesToAnotherWorker},
		{"ExpiredLeaseNobodyTookIsStillTheWorkers", testExpiredLeaseNobodyTookIsRenewed},
		{"ReleasedJobWaitsItsAfterAndKeepsItsPlace", testReleaseJobWaitsItsAfter},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newDatabase(t))
		})
	}
}

func usd(d int64) *budget.USD {
	v := budget.Dollars(d)
	return &v
}

func int64p(n int64) *int64 { return &n }

func testLedgerIsIdempotent(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	e := purser.LedgerEntry{Key: "call-1/1", TaskID: "t", RunID: "r", CallID: "call-1", Event: budget.UsageEvent{InputTokens: 10, USD: 100, CostSource: budget.CostReported}}
	for range 3 {
		if err := s.AppendUsage(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// The same key from another handle (another process replaying) is
	// still counted once.
	if err := open(t).AppendUsage(ctx, e); err != nil {
		t.Fatal(err)
	}
	e.Key, e.Event.CostSource = "call-1/2", budget.CostUnknown
	if err := s.AppendUsage(ctx, e, e); err != nil {
		t.Fatal(err)
	}
	tot, err := s.UsageTotals(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if tot.Tokens != 20 || tot.USD != 100 || tot.ReportedEvents != 1 || tot.UnknownEvents != 1 || tot.USDSource() != budget.SourcePartial {
		t.Fatalf("task totals = %+v, want 20 tokens, 100 nano-dollars, one reported and one unknown event", tot)
	}
	if run, err := s.RunUsageTotals(ctx, "r"); err != nil || run != tot {
		t.Fatalf("run totals = %+v (%v), want the task's %+v", run, err, tot)
	}
	entries, err := s.Usage(ctx, "t")
	if err != nil || len(entries) != 2 {
		t.Fatalf("ledger holds %d entries (%v), want 2", len(entries), err)
	}
	if err := s.AppendUsage(ctx, purser.LedgerEntry{TaskID: "t"}); err == nil {
		t.Fatal("an entry without an idempotency key was accepted")
	}
	// A batch with a bad entry is refused whole: nothing of it is counted.
	good := purser.LedgerEntry{Key: "call-2/1", TaskID: "t", Event: budget.UsageEvent{OutputTokens: 5}}
	if err := s.AppendUsage(ctx, good, purser.LedgerEntry{TaskID: "t"}); err == nil {
		t.Fatal("a batch holding an entry without a key was accepted")
	}
	if after, _ := s.UsageTotals(ctx, "t"); after != tot {
		t.Fatalf("a refused batch changed the totals: %+v, was %+v", after, tot)
	}
}

// List-price dollars (a flat-rate plan) are kept, per task, run and call,
// apart from money spent: never in USD, which the money caps are checked
// against; a list event may settle unknown ones as a reported one does.
func testListDollars(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	entries := []purser.LedgerEntry{
		{Key: "c1/1", TaskID: "t", RunID: "r", CallID: "c1", Kind: purser.CallMain,
			Event: budget.UsageEvent{Model: "m", InputTokens: 10, CostSource: budget.CostUnknown}},
		{Key: "c1/2", TaskID: "t", RunID: "r", CallID: "c1", Kind: purser.CallMain,
			Event: budget.UsageEvent{Model: "m", InputTokens: 20, USD: 700, CostSource: budget.CostList, SettlesUnknown: 1}},
		{Key: "c2/1", TaskID: "t", RunID: "r", CallID: "c2", Kind: purser.CallMain,
			Event: budget.UsageEvent{Model: "m", OutputTokens: 5, USD: 40, CostSource: budget.CostReported}},
	}
	if err := s.AppendUsage(ctx, entries...); err != nil {
		t.Fatal(err)
	}
	s = open(t)
	tot, err := s.UsageTotals(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	want := budget.Totals{Tokens: 35, USD: 40, ReportedEvents: 1, ListUSD: 700, ListEvents: 1}
	if tot != want || tot.USDSource() != budget.SourceReported {
		t.Fatalf("task totals %+v, want %+v (list dollars apart, the unknown settled)", tot, want)
	}
	if run, err := s.RunUsageTotals(ctx, "r"); err != nil || run != tot {
		t.Fatalf("run totals %+v (%v), want the task's %+v", run, err, tot)
	}
	calls, err := s.CallUsage(ctx, "t")
	if err != nil || len(calls) != 2 {
		t.Fatalf("call usage %+v (%v), want two calls", calls, err)
	}
	if c := calls[0].Totals; c.USD != 0 || c.ListUSD != 700 || c.ListEvents != 1 || c.UnknownEvents != 0 {
		t.Fatalf("call c1 totals %+v, want $0 spent, 700 nano-dollars at list, nothing unknown", c)
	}
	got, err := s.Usage(ctx, "t")
	if err != nil || len(got) != 3 || got[1].Event.CostSource != budget.CostList {
		t.Fatalf("the ledger reads back %+v (%v), want the list event labelled list", got, err)
	}
}

// What each price table (and its rates) priced is summed per task by price
// source and cost source, in first-use order; events without a price source
// (reported ones) are not in it.
func testPriceSources(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	const base, long, none = "built-in prices (read 2026-11-23) as m (standard, base rates)",
		"built-in prices (read 2026-11-23) as m (standard, input above 200,000 tokens)", `no price for "x" in the catalogue`
	ev := func(key, source string, cost budget.CostSource, tokens int64, usd budget.USD) purser.LedgerEntry {
		return purser.LedgerEntry{Key: key, TaskID: "t", CallID: "c", Kind: purser.CallMain,
			Event: budget.UsageEvent{Model: "m", InputTokens: tokens, USD: usd, CostSource: cost, PriceSource: source}}
	}
	if err := s.AppendUsage(ctx, ev("1", base, budget.CostEstimated, 100, 30), ev("2", none, budget.CostUnknown, 7, 0),
		ev("3", base, budget.CostEstimated, 50, 12), ev("4", long, budget.CostEstimated, 300_000, 900), ev("5", "", budget.CostReported, 9, 5),
		ev("3", base, budget.CostEstimated, 50, 12)); err != nil { // a replayed key counts once
		t.Fatal(err)
	}
	if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: "o", TaskID: "other", Event: budget.UsageEvent{InputTokens: 1, USD: 1, CostSource: budget.CostEstimated, PriceSource: base}}); err != nil {
		t.Fatal(err)
	}
	got, err := open(t).PriceSources(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	want := []purser.PriceSourceUsage{
		{Source: base, CostSource: budget.CostEstimated, Events: 2, Tokens: 150, USD: 42},
		{Source: none, CostSource: budget.CostUnknown, Events: 1, Tokens: 7},
		{Source: long, CostSource: budget.CostEstimated, Events: 1, Tokens: 300_000, USD: 900},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("price sources\n%+v\nwant\n%+v", got, want)
	}
}

func testLedgerEntryRoundTrip(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	at := time.Unix(1_700_000_000, 123_456_789)
	want := []purser.LedgerEntry{
		{Key: "c1/1", TaskID: "t", RunID: "r", CallID: "c1", Iteration: 2, Kind: purser.CallMain, At: at,
			Event: budget.UsageEvent{Model: "m-large", InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 800, CacheWriteTokens: 7,
				ReasoningTokens: 40, USD: 12_345, CostSource: budget.CostEstimated, Elapsed: 1500 * time.Millisecond, IterationEnd: true,
				PriceSource: "built-in 2026-11-23: standard rates"}},
		{Key: "c2/1", TaskID: "t", CallID: "c2", Iteration: 3, Kind: purser.CallSelfReview, At: at.Add(time.Second),
			Event: budget.UsageEvent{Model: "m-small", OutputTokens: 1, CostSource: budget.CostNone, Agent: "general-purpose: find the bug"}},
		{Key: "c2/2", TaskID: "t", CallID: "c2", Iteration: 3, Kind: purser.CallSelfReview, At: at.Add(2 * time.Second),
			Event: budget.UsageEvent{Model: "m-small", USD: 99, CostSource: budget.CostReported, SettlesUnknown: 2}},
	}
	if err := s.AppendUsage(ctx, want...); err != nil {
		t.Fatal(err)
	}
	got, err := open(t).Usage(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries read back, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.At.Equal(w.At) {
			t.Errorf("entry %d at %v, want %v", i, g.At, w.At)
		}
		g.At, w.At = time.Time{}, time.Time{}
		if g != w {
			t.Errorf("entry %d read back as\n%+v\nwant\n%+v", i, g, w)
		}
	}
}

func testConcurrentAppends(t *testing.T, open Opener) {
	ctx := t.Context()
	const writers, each = 4, 40
	var wg sync.WaitGroup
	for w := range writers {
		s := open(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Each writer also replays the previous writer's keys:
				// duplicates racing with their originals count once.
				for _, key := range []string{fmt.Sprintf("w%d/%d", w, i), fmt.Sprintf("w%d/%d", (w+1)%writers, i)} {
					if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: key, TaskID: "t", RunID: "r", Event: budget.UsageEvent{OutputTokens: 1, USD: 3, CostSource: budget.CostReported}}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	s := open(t)
	tot, err := s.UsageTotals(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if tot.Tokens != writers*each || tot.USD != 3*writers*each {
		t.Fatalf("%d tokens and %d nano-dollars recorded, want %d and %d", tot.Tokens, tot.USD, writers*each, 3*writers*each)
	}
	if run, _ := s.RunUsageTotals(ctx, "r"); run != tot {
		t.Fatalf("run totals %+v, task totals %+v", run, tot)
	}
}

// The running totals always equal a full sum over the ledger, duplicates and
// batches included, per task and per run.
func testRunningTotalsMatchTheLedger(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	var batch []purser.LedgerEntry
	for i := range 300 {
		src := []budget.CostSource{budget.CostReported, budget.CostEstimated, budget.CostUnknown, budget.CostNone}[i%4]
		e := purser.LedgerEntry{Key: fmt.Sprintf("k%d", i), TaskID: []string{"t1", "t2"}[i%2], RunID: "r",
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
		if len(entries) != 150 {
			t.Fatalf("task %s: %d ledger entries, want 150", task, len(entries))
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
	if got, err := s.UsageTotals(ctx, "never-ran"); err != nil || got != (budget.Totals{}) {
		t.Errorf("totals of a task with no usage: %+v, %v; want zero", got, err)
	}
}

func testTaskRoundTrip(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	iters := 4
	rec := purser.TaskRecord{ID: "t1", RunID: "r", Goal: "fix the parser", Workspace: "/w/t1", File: "/tasks/t1.yaml",
		Budget: budget.Config{Hard: budget.HardLimits{USD: usd(3), MaxIterations: &iters}}, State: purser.StateRunning,
		Elapsed: 90 * time.Second, Owner: "host 42 1000"}
	if err := s.SaveTask(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveTask(ctx, purser.TaskRecord{ID: "t2", State: purser.StatePending}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTaskState(ctx, "t1", purser.StateBlocked, "hard cap on usd"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveElapsed(ctx, "t1", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := open(t).Task(ctx, "t1") // another handle sees it
	if err != nil {
		t.Fatal(err)
	}
	if got.State != purser.StateBlocked || got.Reason != "hard cap on usd" || got.Elapsed != 2*time.Minute || got.Owner != rec.Owner ||
		got.RunID != "r" || got.Goal != rec.Goal || got.Workspace != rec.Workspace || got.File != rec.File {
		t.Fatalf("task read back as %+v", got)
	}
	if got.Budget.Hard.USD == nil || *got.Budget.Hard.USD != budget.Dollars(3) || got.Budget.Hard.MaxIterations == nil || *got.Budget.Hard.MaxIterations != 4 || got.Budget.Hard.Tokens != nil {
		t.Fatalf("task budget read back as %+v", got.Budget.Hard)
	}
	if got.CreatedAt.IsZero() || got.UpdatedAt.Before(got.CreatedAt) {
		t.Fatalf("created %v, updated %v", got.CreatedAt, got.UpdatedAt)
	}
	// Saving again updates in place.
	rec.State, rec.Owner = purser.StateDone, ""
	if err := s.SaveTask(ctx, rec); err != nil {
		t.Fatal(err)
	}
	tasks, err := s.Tasks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tk := range tasks {
		ids = append(ids, tk.ID)
	}
	if !slices.Equal(ids, []string{"t1", "t2"}) || tasks[0].State != purser.StateDone || tasks[0].Owner != "" {
		t.Fatalf("tasks %v, first %+v; want t1 (DONE, no owner) then t2", ids, tasks[0])
	}
}

func testNotFound(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	if _, err := s.Task(ctx, "nope"); !errors.Is(err, purser.ErrNotFound) {
		t.Errorf("missing task: %v, want ErrNotFound", err)
	}
	if err := s.SetTaskState(ctx, "nope", purser.StateDone, ""); !errors.Is(err, purser.ErrNotFound) {
		t.Errorf("state of a missing task: %v, want ErrNotFound", err)
	}
	if err := s.SaveElapsed(ctx, "nope", time.Second); !errors.Is(err, purser.ErrNotFound) {
		t.Errorf("elapsed of a missing task: %v, want ErrNotFound", err)
	}
	if _, err := s.Run(ctx, "nope"); !errors.Is(err, purser.ErrNotFound) {
		t.Errorf("missing run: %v, want ErrNotFound", err)
	}
	if _, err := s.Artifact(ctx, "t", "nope"); !errors.Is(err, purser.ErrNotFound) {
		t.Errorf("missing artifact: %v, want ErrNotFound", err)
	}
	if tasks, err := s.Tasks(ctx); err != nil || len(tasks) != 0 {
		t.Errorf("tasks of an empty store: %v, %v", tasks, err)
	}
}

// Two processes starting the same task at once: exactly one claims it. Each
// claimer has a handle of its own on the same database, as separate
// processes do.
func testClaimTaskIsAtomic(t *testing.T, open Opener) {
	const claimers = 8
	stores := make([]Store, claimers)
	for i := range stores {
		stores[i] = open(t)
	}
	alive := func(string) bool { return false } // every owner is alive
	for round := range 3 {
		id := fmt.Sprintf("t%d", round)
		if round == 2 { // a task that exists already, stopped
			if err := stores[0].SaveTask(t.Context(), purser.TaskRecord{ID: id, State: purser.StateBlocked, Owner: "host 0 0"}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []string
		var refused int
		start := make(chan struct{})
		for i, s := range stores {
			owner := fmt.Sprintf("host %d 1", i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := s.ClaimTask(t.Context(), purser.TaskRecord{ID: id, State: purser.StateRunning, Owner: owner}, alive)
				mu.Lock()
				defer mu.Unlock()
				var ce *purser.TaskClaimedError
				switch {
				case err == nil:
					winners = append(winners, owner)
				case errors.As(err, &ce):
					refused++
					if ce.TaskID != id || ce.Owner == owner || ce.Owner == "" {
						t.Errorf("claimer %s refused with %+v", owner, ce)
					}
				default:
					t.Errorf("claimer %s: %v", owner, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 || refused != claimers-1 {
			t.Fatalf("task %s: %d claimers won and %d were refused; want exactly one winner", id, len(winners), refused)
		}
		got, err := stores[0].Task(t.Context(), id)
		if err != nil || got.Owner != winners[0] || got.State != purser.StateRunning {
			t.Fatalf("task %s stored as %+v (%v), want RUNNING under the winner %s", id, got, err, winners[0])
		}
	}
}

func testClaimTaskOwners(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
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

func testRuns(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	tokens := func(n int64) *budget.Config { return &budget.Config{Hard: budget.HardLimits{Tokens: int64p(n)}} }
	first, err := s.JoinRun(ctx, purser.Run{ID: "shared", Budget: tokens(40_000)})
	if err != nil || first.Budget == nil || *first.Budget.Hard.Tokens != 40_000 {
		t.Fatalf("first join: %+v, %v", first, err)
	}
	second, err := open(t).JoinRun(ctx, purser.Run{ID: "shared", Budget: tokens(400_000)})
	if err != nil || second.Budget == nil || *second.Budget.Hard.Tokens != 40_000 {
		t.Fatalf("second join replaced the run's budget: %+v, %v", second, err)
	}
	if err := s.SaveRun(ctx, purser.Run{ID: "shared", Budget: tokens(50_000)}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Run(ctx, "shared"); err != nil || got.Budget == nil || *got.Budget.Hard.Tokens != 50_000 {
		t.Fatalf("after SaveRun the run is %+v (%v), want its budget replaced with 50000 tokens", got, err)
	}
	if err := s.SaveRun(ctx, purser.Run{ID: "free"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Run(ctx, "free"); err != nil || got.Budget != nil || got.ID != "free" {
		t.Fatalf("a run saved without a budget reads back as %+v (%v)", got, err)
	}
	// Many processes joining a new run at once: one creates it, every one
	// sees the same budget.
	var wg sync.WaitGroup
	budgets := make([]int64, 6)
	for i := range budgets {
		h := open(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			run, err := h.JoinRun(ctx, purser.Run{ID: "raced", Budget: tokens(int64(1000 + i))})
			if err != nil || run.Budget == nil {
				t.Errorf("join %d: %+v, %v", i, run, err)
				return
			}
			budgets[i] = *run.Budget.Hard.Tokens
		}()
	}
	wg.Wait()
	for i, b := range budgets {
		if b != budgets[0] {
			t.Fatalf("joiners saw different budgets: %v (joiner %d)", budgets, i)
		}
	}
}

func testRunElapsedNeverGoesBack(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
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
	// SaveRun (a resume replacing the budget) keeps the clock too.
	if err := s.SaveRun(ctx, purser.Run{ID: "r", Budget: &budget.Config{}}); err != nil {
		t.Fatal(err)
	}
	if run, err := s.Run(ctx, "r"); err != nil || run.Elapsed != 5*time.Second {
		t.Fatalf("after SaveRun the run's elapsed is %s (%v), want 5s", run.Elapsed, err)
	}
}

func testIterations(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	start := time.Unix(1_700_000_000, 1)
	it := purser.IterationRecord{TaskID: "t", N: 1, StartedAt: start}
	if err := s.SaveIteration(ctx, it); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveIteration(ctx, purser.IterationRecord{TaskID: "t", N: 2, StartedAt: start.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Iterations(ctx, "t")
	if err != nil || len(got) != 2 || !got[0].EndedAt.IsZero() || got[0].Outcome != "" || len(got[0].Validators) != 0 {
		t.Fatalf("open iterations read back as %+v (%v)", got, err)
	}
	it.EndedAt, it.Outcome = start.Add(30*time.Second), "failed"
	it.Validators = []purser.ValidatorResult{{Name: "unit", Passed: false, ExitCode: 1, Output: "FAIL x", Duration: 2 * time.Second},
		{Name: "lint", Passed: true, TimedOut: false, ExitCode: 0}}
	if err := s.SaveIteration(ctx, it); err != nil {
		t.Fatal(err)
	}
	got, err = open(t).Iterations(ctx, "t")
	if err != nil || len(got) != 2 {
		t.Fatalf("iterations %+v, %v", got, err)
	}
	g := got[0]
	if g.N != 1 || !g.StartedAt.Equal(start) || !g.EndedAt.Equal(it.EndedAt) || g.Outcome != "failed" || !slices.Equal(g.Validators, it.Validators) {
		t.Fatalf("iteration read back as %+v, want %+v", g, it)
	}
	if got[1].N != 2 {
		t.Fatalf("iterations out of order: %+v", got)
	}
}

func testCalls(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	start := time.Unix(1_700_000_000, 500)
	c := purser.CallRecord{ID: "c1", TaskID: "t", Iteration: 1, Kind: purser.CallMain, Attempt: 2, Model: "m", StartedAt: start,
		ContextTokens: 900, Reserved: budget.Amount{USD: 7_000_000, Tokens: 3000}, MaxOutputTokens: 2000, Process: "4242 9876",
		Session: "/home/u/.claude/projects/-ws/0b7e.jsonl", Wire: "/home/u/.local/state/purser/wire/claude-1.jsonl"}
	if err := s.SaveCall(ctx, c); err != nil {
		t.Fatal(err)
	}
	// A call saved at its start and never ended (the process was killed)
	// reads back without an end.
	got, err := open(t).Calls(ctx, "t")
	if err != nil || len(got) != 1 {
		t.Fatalf("calls %+v, %v", got, err)
	}
	if !got[0].EndedAt.IsZero() || got[0].Outcome != "" {
		t.Fatalf("an interrupted call reads back as ended: %+v", got[0])
	}
	if g := got[0]; g.Kind != c.Kind || g.Attempt != 2 || g.Model != "m" || !g.StartedAt.Equal(start) || g.ContextTokens != 900 ||
		g.Reserved != c.Reserved || g.MaxOutputTokens != 2000 || g.Iteration != 1 || g.Process != c.Process || g.Session != c.Session || g.Wire != c.Wire {
		t.Fatalf("call read back as %+v, want %+v", g, c)
	}
	// A stalled call, with the retries its agent made by itself, as the
	// engine saves it when the call ends.
	c.EndedAt, c.Outcome, c.Error, c.Note = start.Add(time.Second), purser.CallStalled, "stalled: no bytes from the agent for 2m0s", "reported $0.01, estimated $0.02"
	c.InnerRetries = 3
	if err := s.SaveCall(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCall(ctx, purser.CallRecord{ID: "c0", TaskID: "t", Iteration: 1, Kind: purser.CallPlanning, Attempt: 1, StartedAt: start.Add(-time.Second),
		EndedAt: start, Outcome: purser.CallOK}); err != nil {
		t.Fatal(err)
	}
	got, err = s.Calls(ctx, "t")
	if err != nil || len(got) != 2 || got[0].ID != "c0" || got[1].ID != "c1" {
		t.Fatalf("calls %+v (%v), want c0 then c1, in the order they started", got, err)
	}
	if g := got[1]; !g.EndedAt.Equal(c.EndedAt) || g.Outcome != purser.CallStalled || g.Error != c.Error || g.Note != c.Note || g.InnerRetries != 3 {
		t.Fatalf("ended call read back as %+v", g)
	}
}

func testDegrades(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	want := []purser.DegradeRecord{
		{TaskID: "t", Iteration: 2, Call: purser.CallMain, Action: purser.ShrinkContext, Tier: budget.Warning, Metric: budget.Money, Scope: budget.ScopeTask, Detail: "52% of $1", At: time.Unix(10, 0)},
		{TaskID: "t", Iteration: 3, Call: purser.CallSelfReview, Action: purser.DisableSelfReview, Tier: budget.Warning, Metric: budget.Tokens, Scope: budget.ScopeRun, Detail: "run", At: time.Unix(20, 0)},
	}
	for _, d := range want {
		if err := s.SaveDegrade(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	got, err := open(t).Degrades(ctx, "t")
	if err != nil || len(got) != 2 {
		t.Fatalf("degrades %+v, %v", got, err)
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.At.Equal(w.At) {
			t.Errorf("degrade %d at %v, want %v", i, g.At, w.At)
		}
		g.At, w.At = time.Time{}, time.Time{}
		if g != w {
			t.Errorf("degrade %d read back as %+v, want %+v", i, g, w)
		}
	}
}

func testBudgetChanges(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	c := purser.BudgetChange{TaskID: "t", At: time.Unix(100, 0), By: "ann@box", Source: "/home/ann/raise.yaml",
		From: budget.Config{Hard: budget.HardLimits{USD: usd(1)}}, To: budget.Config{Hard: budget.HardLimits{USD: usd(1000)}}}
	if err := s.SaveBudgetChange(ctx, c); err != nil {
		t.Fatal(err)
	}
	second := c
	second.At, second.From, second.To = time.Unix(200, 0), c.To, budget.Config{Hard: budget.HardLimits{USD: usd(2000)}}
	if err := s.SaveBudgetChange(ctx, second); err != nil {
		t.Fatal(err)
	}
	got, err := open(t).BudgetChanges(ctx, "t")
	if err != nil || len(got) != 2 {
		t.Fatalf("changes %+v, %v", got, err)
	}
	if g := got[0]; g.By != c.By || g.Source != c.Source || !g.At.Equal(c.At) || *g.From.Hard.USD != budget.Dollars(1) || *g.To.Hard.USD != budget.Dollars(1000) {
		t.Fatalf("change read back as %+v", g)
	}
	if g := got[1]; !g.At.Equal(second.At) || *g.To.Hard.USD != budget.Dollars(2000) {
		t.Fatalf("changes out of order: second read back as %+v", g)
	}
	if other, err := s.BudgetChanges(ctx, "other"); err != nil || len(other) != 0 {
		t.Fatalf("another task's changes: %+v, %v", other, err)
	}
}

func testArtifacts(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	if err := s.SaveArtifact(ctx, "t", "plan.md", []byte("first")); err != nil {
		t.Fatal(err)
	}
	binary := []byte{0, 1, 2, 0xff, 0}
	if err := s.SaveArtifact(ctx, "t", "plan.md", binary); err != nil {
		t.Fatal(err)
	}
	got, err := open(t).Artifact(ctx, "t", "plan.md")
	if err != nil || !slices.Equal(got, binary) {
		t.Fatalf("artifact %q (%v), want the replacement %q", got, err, binary)
	}
	if _, err := s.Artifact(ctx, "other", "plan.md"); !errors.Is(err, purser.ErrNotFound) {
		t.Fatalf("another task's artifact: %v, want ErrNotFound", err)
	}
}

func testSharedRunCountsSpendAndHolds(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	caps := budget.Amount{USD: budget.Dollars(1), Tokens: 1000}
	if got, err := s.RunAvailable(ctx, "r", caps); err != nil || got != caps {
		t.Fatalf("headroom of a new run: %+v (%v), want the caps", got, err)
	}
	if err := s.AppendUsage(ctx, purser.LedgerEntry{Key: "k", TaskID: "t", RunID: "r", Event: budget.UsageEvent{InputTokens: 100, USD: 250_000_000, CostSource: budget.CostReported}}); err != nil {
		t.Fatal(err)
	}
	release, err := s.ReserveRun(ctx, "r", purser.Holder{}, caps, budget.Amount{USD: 250_000_000, Tokens: 300}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := budget.Amount{USD: 500_000_000, Tokens: 600}
	if got, err := open(t).RunAvailable(ctx, "r", caps); err != nil || got != want {
		t.Fatalf("headroom after spend and a hold: %+v (%v), want %+v", got, err, want)
	}
	var ibe *budget.InsufficientBudgetError
	_, err = s.ReserveRun(ctx, "r", purser.Holder{}, caps, budget.Amount{USD: 1, Tokens: 601}, time.Hour)
	if !errors.As(err, &ibe) || ibe.Metric != budget.Tokens || ibe.Scope != budget.ScopeRun || ibe.Available != want {
		t.Fatalf("a hold past the token cap: %v, want an InsufficientBudgetError on tokens saying %+v fits", err, want)
	}
	_, err = s.ReserveRun(ctx, "r", purser.Holder{}, caps, budget.Amount{USD: 500_000_001}, time.Hour)
	if !errors.As(err, &ibe) || ibe.Metric != budget.Money {
		t.Fatalf("a hold past the money cap: %v, want an InsufficientBudgetError on money", err)
	}
	release()
	if got, _ := s.RunAvailable(ctx, "r", caps); got != (budget.Amount{USD: 750_000_000, Tokens: 900}) {
		t.Fatalf("headroom after the release: %+v, want $0.75 and 900 tokens", got)
	}
	// Uncapped fields stay unlimited however much is spent or held.
	tokensOnly := budget.Amount{USD: budget.UnlimitedUSD, Tokens: 1000}
	if _, err := s.ReserveRun(ctx, "r", purser.Holder{}, tokensOnly, budget.Amount{USD: budget.Dollars(1_000_000), Tokens: 900}, time.Hour); err != nil {
		t.Fatalf("a hold on an uncapped money field: %v", err)
	}
	if got, _ := s.RunAvailable(ctx, "r", tokensOnly); got.USD != budget.UnlimitedUSD || got.Tokens != 0 {
		t.Fatalf("headroom with money uncapped: %+v", got)
	}
	// Another run's spend and holds are its own.
	if got, _ := s.RunAvailable(ctx, "other", caps); got != caps {
		t.Fatalf("another run's headroom: %+v, want the caps", got)
	}
}

// Many processes reserving against one run at once never hold more than
// its caps between them.
func testSharedRunUnderConcurrency(t *testing.T, open Opener) {
	ctx := t.Context()
	const handles, perHandle = 4, 10
	caps := budget.Amount{USD: budget.Dollars(1), Tokens: 10_000}
	want := budget.Amount{USD: 30_000_000, Tokens: 700} // tokens fit 14 times, money 33
	granted, refusals := reserveAtOnce(t, open, handles, perHandle, func(s Store) error {
		_, err := s.ReserveRun(ctx, "r", purser.Holder{}, caps, want, time.Hour)
		return err
	})
	if refused := len(refusals); granted != 14 || refused != handles*perHandle-14 {
		t.Fatalf("%d holds granted, %d refused; want exactly 14 (10000/700) granted", granted, refused)
	}
	if got, _ := open(t).RunAvailable(ctx, "r", caps); got.Tokens != 10_000-14*700 {
		t.Fatalf("headroom %+v after 14 holds of 700 tokens", got)
	}
}

// reserveAtOnce opens handles handles on the database, as that many
// processes would, and from perHandle goroutines on each calls reserve, all
// released at once. It returns how many holds were granted and the refusals
// (each an InsufficientBudgetError); any other error fails the test.
func reserveAtOnce(t *testing.T, open Opener, handles, perHandle int, reserve func(s Store) error) (granted int, refusals []*budget.InsufficientBudgetError) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := make(chan struct{})
	for range handles {
		s := open(t)
		for range perHandle {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := reserve(s)
				mu.Lock()
				defer mu.Unlock()
				var ibe *budget.InsufficientBudgetError
				switch {
				case err == nil:
					granted++
				case errors.As(err, &ibe):
					refusals = append(refusals, ibe)
				default:
					t.Errorf("reserve: %v", err)
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	return granted, refusals
}

func testSharedRunHoldExpires(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	caps := budget.Amount{USD: budget.UnlimitedUSD, Tokens: 1000}
	// The process holding it dies: its release is never called.
	if _, err := s.ReserveRun(ctx, "r", purser.Holder{}, caps, budget.Amount{Tokens: 1000}, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.RunAvailable(ctx, "r", caps); got.Tokens != 0 {
		t.Fatalf("headroom %+v while the hold is live, want 0 tokens", got)
	}
	other := open(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := other.RunAvailable(ctx, "r", caps)
		if err != nil {
			t.Fatal(err)
		}
		if got.Tokens == 1000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hold never expired: headroom %+v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := other.ReserveRun(ctx, "r", purser.Holder{}, caps, budget.Amount{Tokens: 1000}, time.Hour); err != nil {
		t.Fatalf("a hold after the dead one expired: %v", err)
	}
}

// A sub-agent's usage on the same call and model as the main agent's is a
// row of its own (issue 14: who spent it), and the rows still sum to the call.
func testCallUsagePerAgent(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	main := func(key string, in int64, agent string) purser.LedgerEntry {
		return purser.LedgerEntry{Key: key, TaskID: "t", CallID: "a", Iteration: 1, Kind: purser.CallMain,
			Event: budget.UsageEvent{Model: "m1", InputTokens: in, USD: budget.USD(in), CostSource: budget.CostEstimated, Agent: agent}}
	}
	events := []purser.LedgerEntry{main("a/1", 100, ""), main("a/2", 30, "explore: read the tests"), main("a/3", 5, ""),
		main("a/4", 7, "explore: read the tests"), main("a/5", 2, "toolu_02")}
	for range 2 { // the second append is a replay: ignored
		if err := s.AppendUsage(ctx, events...); err != nil {
			t.Fatal(err)
		}
	}
	got, err := open(t).CallUsage(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	row := func(agent string, tokens, events int64) purser.CallUsage {
		return purser.CallUsage{CallID: "a", Iteration: 1, Kind: purser.CallMain, Model: "m1", Agent: agent,
			Totals: budget.Totals{USD: budget.USD(tokens), Tokens: tokens, EstimatedEvents: events}}
	}
	want := []purser.CallUsage{row("", 105, 2), row("explore: read the tests", 37, 2), row("toolu_02", 2, 1)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("CallUsage =\n%+v\nwant\n%+v", got, want)
	}
	ledger, err := s.Usage(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range ledger {
		if e.Event.Agent != events[i].Event.Agent {
			t.Errorf("ledger entry %d: agent %q, want %q", i, e.Event.Agent, events[i].Event.Agent)
		}
	}
}

func testCallUsage(t *testing.T, open Opener) {
	ctx := t.Context()
	s := open(t)
	events := []purser.LedgerEntry{
		{Key: "a/1", TaskID: "t", CallID: "a", Iteration: 1, Kind: purser.CallMain, Event: budget.UsageEvent{Model: "m1", InputTokens: 100, CacheReadTokens: 40, OutputTokens: 10, USD: 5, CostSource: budget.CostReported}},
		{Key: "a/2", TaskID: "t", CallID: "a", Iteration: 1, Kind: purser.CallMain, Event: budget.UsageEvent{Model: "m1", InputTokens: 50, OutputTokens: 5, USD: 3, CostSource: budget.CostEstimated}},
		{Key: "a/3", TaskID: "t", CallID: "a", Iteration: 1, Kind: purser.CallMain, Event: budget.UsageEvent{Model: "m2", InputTokens: 7, CostSource: budget.CostUnknown}},
		{Key: "end/1", TaskID: "t", Iteration: 1, Event: budget.UsageEvent{IterationEnd: true}},
		{Key: "b/1", TaskID: "t", CallID: "b", Iteration: 2, Kind: purser.CallSelfReview, Event: budget.UsageEvent{Model: "m1", InputTokens: 1, OutputTokens: 1, USD: 1, CostSource: budget.CostReported}},
		{Key: "a/4", TaskID: "t", CallID: "a", Iteration: 1, Kind: purser.CallMain, Event: budget.UsageEvent{Model: "m2", USD: 4, CostSource: budget.CostReported, SettlesUnknown: 1}},
		{Key: "x/1", TaskID: "other", CallID: "x", Iteration: 1, Kind: purser.CallMain, Event: budget.UsageEvent{Model: "m1", InputTokens: 999}},
	}
	for range 2 { // the second append is a replay: ignored
		if err := s.AppendUsage(ctx, events...); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.CallUsage(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	want := []purser.CallUsage{
		{CallID: "a", Iteration: 1, Kind: purser.CallMain, Model: "m1", CachedTokens: 40, Totals: budget.Totals{USD: 8, Tokens: 165, ReportedEvents: 1, EstimatedEvents: 1}},
		{CallID: "a", Iteration: 1, Kind: purser.CallMain, Model: "m2", Totals: budget.Totals{USD: 4, Tokens: 7, ReportedEvents: 1}},
		{CallID: "b", Iteration: 2, Kind: purser.CallSelfReview, Model: "m1", Totals: budget.Totals{USD: 1, Tokens: 2, ReportedEvents: 1}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("CallUsage =\n%+v\nwant\n%+v", got, want)
	}
}
