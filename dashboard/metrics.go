package dashboard

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// Every label below takes its values from a fixed set (the store's
// enumerations, with anything else counted as "other"), so no series grows
// with the number of tasks, runs or calls: no task or run id is a label.
var (
	spendDesc = prometheus.NewDesc("purser_spend_usd_total",
		"Money spent, in US dollars, by where the figure came from: reported by the backend or estimated by Purser from its price catalogue. Spend nobody knows is not in here: see purser_unknown_cost_events_total.",
		[]string{"source"}, nil)
	unknownDesc = prometheus.NewDesc("purser_unknown_cost_events_total",
		"Usage events that spent money nobody knows how much of (never counted as $0).", nil, nil)
	tokensDesc = prometheus.NewDesc("purser_tokens_total",
		"Tokens used, by type. input and output are the budget's tokens; cache_read and cache_write are part of input, reasoning is part of output.",
		[]string{"type"}, nil)
	callsDesc = prometheus.NewDesc("purser_calls_total",
		"Backend calls, retries included, by kind and outcome.", []string{"kind", "outcome"}, nil)
	refusalsDesc = prometheus.NewDesc("purser_admission_refusals_total",
		"Calls the budget did not admit (nothing was sent).", nil, nil)
	tasksDesc = prometheus.NewDesc("purser_tasks",
		"Tasks by state and by the tier of their own budget.", []string{"state", "tier"}, nil)
	runsDesc = prometheus.NewDesc("purser_runs",
		"Runs by the tier of the run budget; runs without a run budget are tier \"none\".", []string{"tier"}, nil)
	hardStopsDesc = prometheus.NewDesc("purser_hard_stops",
		"Tasks stopped by their budget (BLOCKED).", nil, nil)
	degradesDesc = prometheus.NewDesc("purser_degrade_actions_total",
		"Degrade actions taken, by action and by the tier they were taken at.", []string{"action", "tier"}, nil)
	timeToStopDesc = prometheus.NewDesc("purser_time_to_stop_seconds",
		"Time from a BLOCKED task's crossing of a hard cap to its stop, from the first crossing of: the ledger entry that put the task's own budget at HARD; "+
			"its wall-time cap (the moment its clock, time carried over resumes included, reached the cap); the ledger entry, of any task of its run, "+
			"that put the run's budget at HARD while the task ran. To the end of the task's call the crossing cut, or to the task's BLOCKED record "+
			"when no call was running. A run's wall-time cap is not observed.",
		nil, nil)
	scrapeErrorDesc = prometheus.NewDesc("purser_store_read_errors",
		"1 when this scrape could not read the store (the other metrics are then missing; purser serve logs why), else 0.", nil, nil)
)

var (
	callKinds    = []string{string(purser.CallPlanning), string(purser.CallMain), string(purser.CallSelfReview)}
	callOutcomes = []string{string(purser.CallOK), string(purser.CallCancelled), string(purser.CallTransient), string(purser.CallFailed), string(purser.CallRefused), string(purser.CallInterrupted), string(purser.CallStalled)}
	taskStates   = []string{string(purser.StatePending), string(purser.StateRunning), string(purser.StateDone), string(purser.StateBlocked), string(purser.StateFailed)}
	degradeNames = func() []string {
		var out []string
		for _, a := range purser.KnownDegradeActions {
			out = append(out, string(a))
		}
		return out
	}()
)

// bounded returns v when it is one of the known values, else "other": the
// store is read as it is, and a label must not take arbitrary values.
func bounded(v string, known []string) string {
	if slices.Contains(known, v) {
		return v
	}
	return "other"
}

// Collector computes Purser's metrics from a store at scrape time, so
// several processes writing one database are all counted, and restarting
// `purser serve` loses nothing. What it keeps between scrapes is a cache
// of figures derived from the store, each under the running totals it was
// derived at (see scrapeCache): a scrape reads a row per task and per
// series, and the ledger only of a task whose totals moved or that stopped.
type Collector struct {
	store   purser.StoreReader
	logger  *slog.Logger
	timeout time.Duration

	mu    sync.Mutex // one scrape at a time reads and fills the cache
	cache scrapeCache
}

// NewCollector returns a Collector over store; logger (nil: discard) is
// told why a scrape could not read the store.
func NewCollector(store purser.StoreReader, logger *slog.Logger) *Collector {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Collector{store: store, logger: logger, timeout: 10 * time.Second, cache: newScrapeCache()}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{spendDesc, unknownDesc, tokensDesc, callsDesc, refusalsDesc, tasksDesc, runsDesc, hardStopsDesc, degradesDesc, timeToStopDesc, scrapeErrorDesc} {
		ch <- d
	}
}

type tally struct {
	spend    map[budget.CostSource]budget.USD
	unknown  int64
	tokens   map[string]int64
	calls    map[[2]string]int64
	refusals int64
	tasks    map[[2]string]int64
	runs     map[string]int64
	blocked  int64
	degrades map[[2]string]int64
	stops    []time.Duration // time to stop, per BLOCKED task whose crossing the store shows
}

// timeToStopBuckets are the histogram's upper bounds, in seconds: a cut
// call is expected to stop within a second or so (the engine cancels it at
// once), and a backend that ignores the signal shows in the top buckets.
var timeToStopBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// Collect reads the store and sends the metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	t, err := c.read(ctx)
	if err != nil {
		// A gauge an alert can fire on, rather than a failed scrape that
		// looks like a dead server.
		c.logger.Error("metrics: read the store", "err", err)
		ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, 0)
	for _, src := range []budget.CostSource{budget.CostReported, budget.CostEstimated} {
		ch <- prometheus.MustNewConstMetric(spendDesc, prometheus.CounterValue, t.spend[src].Float(), src.String())
	}
	ch <- prometheus.MustNewConstMetric(unknownDesc, prometheus.CounterValue, float64(t.unknown))
	for _, typ := range []string{"input", "output", "cache_read", "cache_write", "reasoning"} {
		ch <- prometheus.MustNewConstMetric(tokensDesc, prometheus.CounterValue, float64(t.tokens[typ]), typ)
	}
	// Every known combination, zeros included, so that rates and alerts
	// see a series from the first scrape; "other" only when it occurs.
	for _, kind := range append(callKinds, "other") {
		for _, outcome := range append(callOutcomes, "other") {
			if n, ok := t.calls[[2]string{kind, outcome}]; ok || (kind != "other" && outcome != "other") {
				ch <- prometheus.MustNewConstMetric(callsDesc, prometheus.CounterValue, float64(n), kind, outcome)
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(refusalsDesc, prometheus.CounterValue, float64(t.refusals))
	for _, state := range append(taskStates, "other") {
		for _, tier := range []string{"optimal", "warning", "hard"} {
			if n, ok := t.tasks[[2]string{state, tier}]; ok || state != "other" {
				ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, float64(n), state, tier)
			}
		}
	}
	for tier, n := range t.runs {
		ch <- prometheus.MustNewConstMetric(runsDesc, prometheus.GaugeValue, float64(n), tier)
	}
	ch <- prometheus.MustNewConstMetric(hardStopsDesc, prometheus.GaugeValue, float64(t.blocked))
	for k, n := range t.degrades {
		ch <- prometheus.MustNewConstMetric(degradesDesc, prometheus.CounterValue, float64(n), k[0], k[1])
	}
	ch <- timeToStopHistogram(t.stops)
}

// timeToStopHistogram turns the observed times to stop into a histogram.
func timeToStopHistogram(stops []time.Duration) prometheus.Metric {
	buckets := make(map[float64]uint64, len(timeToStopBuckets))
	for _, b := range timeToStopBuckets {
		buckets[b] = 0 // every bound is exposed, empty ones too
	}
	var sum float64
	for _, d := range stops {
		secs := d.Seconds()
		sum += secs
		for _, b := range timeToStopBuckets {
			if secs <= b {
				buckets[b]++ // cumulative: every bound at or above it
			}
		}
	}
	return prometheus.MustNewConstHistogram(timeToStopDesc, uint64(len(stops)), sum, buckets)
}

// blockedTask is what the time to stop of a BLOCKED task is measured from.
type blockedTask struct {
	rec        purser.TaskRecord
	usage      []purser.LedgerEntry
	calls      []purser.CallRecord
	iterations []purser.IterationRecord
}

// crossing is a moment a hard cap was crossed, with the task and call of
// the ledger entry that crossed it (empty for a wall-time crossing).
type crossing struct {
	at     time.Time
	taskID string
	callID string
}

// timeToStop measures, for a BLOCKED task, from the first crossing of a
// hard cap that stopped it to its stop: the end of its call the crossing
// cut (the call whose ledger entry crossed, else the call of the task
// running at that moment), or the task's BLOCKED record when no call was
// running. The crossings considered, the earliest of which stopped it:
//   - the ledger entry that put the task's own budget at HARD;
//   - its own wall-time cap: the budget counts time carried over from
//     earlier sessions (the task record's Elapsed) plus the last session's
//     clock, which stops as the last iteration is recorded ended, so the
//     crossing is that end minus how far Elapsed went past the cap (the
//     clock stops just after that record, once the heartbeat is stopped:
//     the crossing is placed that much early, never late);
//   - runCrossing, the entry (of any task of the run) that put the run's
//     budget at HARD, when it came while the task's last iteration ran.
//
// ok is false when none of these crossed, or a time is missing.
func timeToStop(b blockedTask, runCrossing *crossing) (time.Duration, bool) {
	var found []crossing
	if c, ok := ledgerCrossing(b.rec.Budget, b.usage); ok {
		found = append(found, c)
	}
	last, ran := lastIteration(b.iterations)
	if hard := b.rec.Budget.Hard.TimeMinutes; hard != nil && ran && b.rec.Elapsed >= hard.Duration() {
		found = append(found, crossing{at: last.EndedAt.Add(-(b.rec.Elapsed - hard.Duration()))})
	}
	if runCrossing != nil && ran && !runCrossing.at.Before(last.StartedAt) && !runCrossing.at.After(last.EndedAt) {
		c := *runCrossing
		if c.taskID != b.rec.ID {
			c.callID = "" // another task's call: this task's own is found by time
		}
		found = append(found, c)
	}
	if len(found) == 0 {
		return 0, false
	}
	first := slices.MinFunc(found, func(a, b crossing) int { return a.at.Compare(b.at) })
	stop := b.rec.UpdatedAt
	for _, call := range b.calls {
		if call.EndedAt.IsZero() {
			continue
		}
		if call.ID == first.callID || (first.callID == "" && !call.StartedAt.After(first.at) && !call.EndedAt.Before(first.at)) {
			stop = call.EndedAt
			break
		}
	}
	if stop.IsZero() {
		return 0, false
	}
	// The stop is recorded after the crossing; clocks of two processes
	// sharing a store may disagree by a little, which is not negative time.
	return max(stop.Sub(first.at), 0), true
}

// ledgerCrossing finds, in a ledger in order, the entry that put a budget
// of cfg at HARD, replayed through a budget.Manager whose clock is never
// started: only what the ledger holds counts, wall time does not.
func ledgerCrossing(cfg budget.Config, usage []purser.LedgerEntry) (crossing, bool) {
	m, err := budget.NewManager(cfg, budget.Options{})
	if err != nil {
		return crossing{}, false
	}
	for _, e := range usage {
		if m.RecordUsage(e.Event) != budget.Hard {
			continue
		}
		if e.At.IsZero() {
			return crossing{}, false
		}
		return crossing{at: e.At, taskID: e.TaskID, callID: e.CallID}, true
	}
	return crossing{}, false
}

// lastIteration is the task's last iteration that has ended: the one its
// last session stopped in.
func lastIteration(its []purser.IterationRecord) (purser.IterationRecord, bool) {
	var last purser.IterationRecord
	for _, it := range its {
		if !it.EndedAt.IsZero() && !it.StartedAt.IsZero() && it.N >= last.N {
			last = it
		}
	}
	return last, last.N > 0
}

// runCrossings finds, for each run with a budget, the ledger entry that put
// the run at HARD: every task's entries of the run, in the order they were
// recorded, replayed through the run's budget.
func runCrossings(ledgers map[string][]purser.LedgerEntry, budgets map[string]budget.Config) map[string]*crossing {
	out := map[string]*crossing{}
	for runID, cfg := range budgets {
		entries := ledgers[runID]
		slices.SortStableFunc(entries, func(a, b purser.LedgerEntry) int { return a.At.Compare(b.At) })
		if c, ok := ledgerCrossing(cfg, entries); ok {
			out[runID] = &c
		}
	}
	return out
}
