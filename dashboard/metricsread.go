package dashboard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/report"
)

// scrapeCache keeps, between scrapes, what a scrape would otherwise read
// the ledger for, each figure under the running totals (and task record)
// it was derived from: when those are unchanged, so is the figure, since
// the ledger only grows and every event moves the totals. A figure whose
// key moved is derived again; one of a task or run the store no longer
// has is dropped.
type scrapeCache struct {
	// breakdowns: each task's ledger by cost source and token type.
	breakdowns map[string]cachedBreakdown
	// stops: each BLOCKED task's time to stop, found once when the scrape
	// first sees it stopped; the ledger is read only for a task or run
	// whose totals crossed a hard cap.
	stops map[string]cachedStop
	// runCrossings: where each run at HARD crossed its hard cap.
	runCrossings map[string]cachedCrossing
}

func newScrapeCache() scrapeCache {
	return scrapeCache{breakdowns: map[string]cachedBreakdown{}, stops: map[string]cachedStop{}, runCrossings: map[string]cachedCrossing{}}
}

type cachedBreakdown struct {
	totals budget.Totals
	b      purser.UsageBreakdown
	seq    int64 // the last ledger row b sums (purser.BreakdownAfterStore)
}

// stopKey is what a task's time to stop is found from, short of its ledger.
type stopKey struct {
	updated   int64 // the task record's UpdatedAt, in Unix nanoseconds
	elapsed   time.Duration
	totals    budget.Totals
	runTotals budget.Totals // zero while the run is not at HARD
}

type cachedStop struct {
	key stopKey
	d   time.Duration
	ok  bool
}

type cachedCrossing struct {
	totals budget.Totals
	c      *crossing
}

// runInfo is what a scrape reads of a run once.
type runInfo struct {
	budget *budget.Config // nil without a run budget, or when the run is gone
	totals budget.Totals
	hard   bool // its ledger's totals alone put its budget at HARD
}

// read tallies the store for one scrape: the tasks and their running
// totals, each run once, the calls and degrade actions counted by the
// store, each task's breakdown (read again only when its totals moved) and
// the time to stop of each BLOCKED task (found once).
func (c *Collector) read(ctx context.Context) (tally, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := tally{spend: map[budget.CostSource]budget.USD{}, tokens: map[string]int64{}, calls: map[[2]string]int64{},
		tasks: map[[2]string]int64{}, runs: map[string]int64{}, degrades: map[[2]string]int64{}}
	ms, ok := c.store.(purser.MetricsStore)
	if !ok {
		ms = ledgerMetrics{c.store}
	}
	recs, err := c.store.Tasks(ctx)
	if err != nil {
		return t, fmt.Errorf("read tasks: %w", err)
	}
	totals, err := ms.TaskUsageTotals(ctx)
	if err != nil {
		return t, fmt.Errorf("read usage totals: %w", err)
	}
	runs := map[string]*runInfo{}
	seen := map[string]bool{}
	for _, rec := range recs {
		seen[rec.ID] = true
		run := runs[rec.RunID]
		if run == nil {
			if run, err = c.readRun(ctx, &t, rec.RunID); err != nil {
				return t, err
			}
			runs[rec.RunID] = run
		}
		if err := c.readTask(ctx, ms, &t, rec, totals[rec.ID], run, recs); err != nil {
			return t, err
		}
	}
	for id := range c.cache.breakdowns {
		if !seen[id] {
			delete(c.cache.breakdowns, id)
		}
	}
	for id := range c.cache.stops {
		if !seen[id] {
			delete(c.cache.stops, id)
		}
	}
	for id := range c.cache.runCrossings {
		if runs[id] == nil {
			delete(c.cache.runCrossings, id)
		}
	}
	calls, err := ms.CallCounts(ctx)
	if err != nil {
		return t, fmt.Errorf("count calls: %w", err)
	}
	for k, n := range calls {
		t.calls[[2]string{bounded(k[0], callKinds), bounded(k[1], callOutcomes)}] += n
		if k[1] == string(purser.CallRefused) {
			t.refusals += n
		}
	}
	degrades, err := ms.DegradeCounts(ctx)
	if err != nil {
		return t, fmt.Errorf("count degrade actions: %w", err)
	}
	for k, n := range degrades {
		t.degrades[[2]string{bounded(k[0], degradeNames), bounded(k[1], tierNames)}] += n
	}
	return t, nil
}

// tierNames are budget.Tier's names, the values a degrade action's tier is
// stored as.
var tierNames = []string{budget.Optimal.String(), budget.Warning.String(), budget.Hard.String()}

// readRun counts a run by the tier of its budget ("none" without one) and
// returns what the time to stop of its tasks needs of it.
func (c *Collector) readRun(ctx context.Context, t *tally, runID string) (*runInfo, error) {
	info := &runInfo{}
	run, err := c.store.Run(ctx, runID)
	if errors.Is(err, purser.ErrNotFound) || (err == nil && run.Budget == nil) {
		t.runs["none"]++
		return info, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", runID, err)
	}
	if info.totals, err = c.store.RunUsageTotals(ctx, runID); err != nil {
		return nil, fmt.Errorf("read usage of run %s: %w", runID, err)
	}
	st, err := report.TotalsStatus(*run.Budget, info.totals, run.Elapsed)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	t.runs[st.Tier.String()]++
	info.budget = run.Budget
	if info.hard, err = ledgerHard(*run.Budget, info.totals); err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	return info, nil
}

// ledgerHard says whether a ledger's totals alone (wall time left out)
// put a budget of cfg at HARD: only then does the ledger hold an entry that
// crossed a hard cap, since every entry only adds to the totals.
func ledgerHard(cfg budget.Config, totals budget.Totals) (bool, error) {
	st, err := report.TotalsStatus(cfg, totals, 0)
	return st.Tier == budget.Hard, err
}

// readTask tallies one task: its state and tier, its spend and tokens, and,
// when it is BLOCKED, its time to stop.
func (c *Collector) readTask(ctx context.Context, ms purser.MetricsStore, t *tally, rec purser.TaskRecord, totals budget.Totals, run *runInfo, recs []purser.TaskRecord) error {
	st, err := report.TotalsStatus(rec.Budget, totals, rec.Elapsed)
	if err != nil {
		return fmt.Errorf("task %s: %w", rec.ID, err)
	}
	t.tasks[[2]string{bounded(string(rec.State), taskStates), st.Tier.String()}]++
	b, err := c.breakdown(ctx, ms, rec.ID, totals)
	if err != nil {
		return err
	}
	t.spend[budget.CostReported] += b.ReportedUSD
	t.spend[budget.CostEstimated] += b.EstimatedUSD
	t.unknown += b.UnknownEvents
	t.tokens["input"] += b.InputTokens
	t.tokens["output"] += b.OutputTokens
	t.tokens["cache_read"] += b.CacheReadTokens
	t.tokens["cache_write"] += b.CacheWriteTokens
	t.tokens["reasoning"] += b.ReasoningTokens
	if rec.State != purser.StateBlocked {
		delete(c.cache.stops, rec.ID)
		return nil
	}
	t.blocked++
	key := stopKey{updated: rec.UpdatedAt.UnixNano(), elapsed: rec.Elapsed, totals: totals}
	if run.hard {
		// Only a run at HARD has a crossing to find: while it is not, the
		// other tasks of the run spending do not move the key.
		key.runTotals = run.totals
	}
	cached, ok := c.cache.stops[rec.ID]
	if !ok || cached.key != key {
		cached = cachedStop{key: key}
		if cached.d, cached.ok, err = c.stop(ctx, rec, totals, run, recs); err != nil {
			return err
		}
		c.cache.stops[rec.ID] = cached
	}
	if cached.ok {
		t.stops = append(t.stops, cached.d)
	}
	return nil
}

// breakdown is a task's ledger by cost source and token type: the cached
// one while its running totals have not moved; when they have, the rows
// appended since are added to it where the store numbers rows in commit
// order (purser.BreakdownAfterStore), else the task's ledger is summed
// again.
func (c *Collector) breakdown(ctx context.Context, ms purser.MetricsStore, taskID string, totals budget.Totals) (purser.UsageBreakdown, error) {
	cached, ok := c.cache.breakdowns[taskID]
	if ok && cached.totals == totals {
		return cached.b, nil
	}
	if totals == (budget.Totals{}) {
		return purser.UsageBreakdown{}, nil // nothing spent: nothing to read
	}
	if after, incremental := ms.(purser.BreakdownAfterStore); incremental {
		if !ok {
			cached = cachedBreakdown{}
		}
		more, seq, err := after.UsageBreakdownAfter(ctx, taskID, cached.seq)
		if err != nil {
			return more, fmt.Errorf("read usage of task %s: %w", taskID, err)
		}
		b := cached.b.Plus(more)
		c.cache.breakdowns[taskID] = cachedBreakdown{totals: totals, b: b, seq: seq}
		return b, nil
	}
	b, err := ms.UsageBreakdown(ctx, taskID)
	if err != nil {
		return b, fmt.Errorf("read usage of task %s: %w", taskID, err)
	}
	c.cache.breakdowns[taskID] = cachedBreakdown{totals: totals, b: b}
	return b, nil
}

// stop finds a BLOCKED task's time to stop (see timeToStop), reading its
// ledger only when its totals crossed its own hard cap, and its run's
// ledger only when the run's did.
func (c *Collector) stop(ctx context.Context, rec purser.TaskRecord, totals budget.Totals, run *runInfo, recs []purser.TaskRecord) (time.Duration, bool, error) {
	b := blockedTask{rec: rec}
	hard, err := ledgerHard(rec.Budget, totals)
	if err != nil {
		return 0, false, fmt.Errorf("task %s: %w", rec.ID, err)
	}
	if hard {
		if b.usage, err = c.store.Usage(ctx, rec.ID); err != nil {
			return 0, false, fmt.Errorf("read ledger of task %s: %w", rec.ID, err)
		}
	}
	if b.calls, err = c.store.Calls(ctx, rec.ID); err != nil {
		return 0, false, fmt.Errorf("read calls of task %s: %w", rec.ID, err)
	}
	if b.iterations, err = c.store.Iterations(ctx, rec.ID); err != nil {
		return 0, false, fmt.Errorf("read iterations of task %s: %w", rec.ID, err)
	}
	runCrossing, err := c.runCrossing(ctx, rec.RunID, run, recs)
	if err != nil {
		return 0, false, err
	}
	d, ok := timeToStop(b, runCrossing)
	return d, ok, nil
}

// runCrossing is where a run crossed its hard cap, nil when its totals
// never did (or it has no budget); its tasks' ledgers are read, in full,
// once per move of the run's totals.
func (c *Collector) runCrossing(ctx context.Context, runID string, run *runInfo, recs []purser.TaskRecord) (*crossing, error) {
	if run.budget == nil || !run.hard {
		return nil, nil
	}
	if cached, ok := c.cache.runCrossings[runID]; ok && cached.totals == run.totals {
		return cached.c, nil
	}
	var entries []purser.LedgerEntry
	for _, rec := range recs {
		if rec.RunID != runID {
			continue
		}
		usage, err := c.store.Usage(ctx, rec.ID)
		if err != nil {
			return nil, fmt.Errorf("read ledger of task %s: %w", rec.ID, err)
		}
		entries = append(entries, usage...)
	}
	cross := runCrossings(map[string][]purser.LedgerEntry{runID: entries}, map[string]budget.Config{runID: *run.budget})[runID]
	c.cache.runCrossings[runID] = cachedCrossing{totals: run.totals, c: cross}
	return cross, nil
}

// ledgerMetrics reads what /metrics needs from a store that does not sum
// it itself (no purser.MetricsStore): from each task's ledger, calls and
// degrade actions.
type ledgerMetrics struct{ s purser.StoreReader }

func (l ledgerMetrics) TaskUsageTotals(ctx context.Context) (map[string]budget.Totals, error) {
	recs, err := l.s.Tasks(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]budget.Totals, len(recs))
	for _, rec := range recs {
		if out[rec.ID], err = l.s.UsageTotals(ctx, rec.ID); err != nil {
			return nil, fmt.Errorf("task %s: %w", rec.ID, err)
		}
	}
	return out, nil
}

func (l ledgerMetrics) UsageBreakdown(ctx context.Context, taskID string) (purser.UsageBreakdown, error) {
	var b purser.UsageBreakdown
	usage, err := l.s.Usage(ctx, taskID)
	if err != nil {
		return b, err
	}
	for _, e := range usage {
		ev := e.Event
		switch ev.CostSource {
		case budget.CostReported:
			b.ReportedUSD += ev.USD
		case budget.CostEstimated:
			b.EstimatedUSD += ev.USD
		case budget.CostUnknown:
			b.UnknownEvents++
		}
		b.InputTokens += ev.InputTokens
		b.OutputTokens += ev.OutputTokens
		b.CacheReadTokens += ev.CacheReadTokens
		b.CacheWriteTokens += ev.CacheWriteTokens
		b.ReasoningTokens += ev.ReasoningTokens
	}
	return b, nil
}

func (l ledgerMetrics) CallCounts(ctx context.Context) (map[purser.LabelPair]int64, error) {
	return l.count(ctx, func(id string) ([]purser.LabelPair, error) {
		calls, err := l.s.Calls(ctx, id)
		var out []purser.LabelPair
		for _, c := range calls {
			if c.Outcome != "" { // still running: counted when it ends
				out = append(out, purser.LabelPair{string(c.Kind), string(c.Outcome)})
			}
		}
		return out, err
	})
}

func (l ledgerMetrics) DegradeCounts(ctx context.Context) (map[purser.LabelPair]int64, error) {
	return l.count(ctx, func(id string) ([]purser.LabelPair, error) {
		degrades, err := l.s.Degrades(ctx, id)
		var out []purser.LabelPair
		for _, d := range degrades {
			out = append(out, purser.LabelPair{string(d.Action), d.Tier.String()})
		}
		return out, err
	})
}

// count counts, over every task, the label pairs of its records.
func (l ledgerMetrics) count(ctx context.Context, pairs func(taskID string) ([]purser.LabelPair, error)) (map[purser.LabelPair]int64, error) {
	recs, err := l.s.Tasks(ctx)
	if err != nil {
		return nil, err
	}
	out := map[purser.LabelPair]int64{}
	for _, rec := range recs {
		ps, err := pairs(rec.ID)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", rec.ID, err)
		}
		for _, p := range ps {
			out[p]++
		}
	}
	return out, nil
}
