// Package dashboard serves `purser serve`: a web page over the store showing
// runs, tasks, their budget gauges, spend over time, degrade actions, calls
// and the STATUS.md and BUDGET.md artifacts, kept live with Server-Sent
// Events; and /metrics for Prometheus. It reads through purser.StoreReader
// (and purser.MetricsStore where the store has it), so it works on any store
// and needs nothing from the engine. A snapshot and a scrape read the
// store's running totals and per-call totals, never the ledger, so they cost
// the same after ten events as after a million.
package dashboard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/redact"
	"github.com/purser-dev/purser/report"
)

// Snapshot is everything the page shows, read from the store at one moment.
// Every string in it is text, never HTML: the page puts it in the document
// with textContent, since the store holds agent output.
type Snapshot struct {
	Runs []RunView `json:"runs"`
	// Budgets are the named budgets as their tree (org → team → repo …):
	// each node's window, tier, spend against its caps and room, as
	// purser budgets tree shows them.
	Budgets []report.BudgetTreeJSON `json:"budgets"`
}

// RunView is one run: its budget (when it has one) and its tasks.
type RunView struct {
	ID     string      `json:"id"`
	Budget *BudgetView `json:"budget,omitempty"`
	Tasks  []TaskView  `json:"tasks"`
}

// BudgetView is a budget's status with one gauge per metric.
type BudgetView struct {
	Tier    string  `json:"tier"`    // OPTIMAL, WARNING, HARD
	Cause   string  `json:"cause"`   // the metric that put it there; "" when OPTIMAL
	Money   string  `json:"money"`   // budget.FormatUSD: "unknown", never $0
	Summary string  `json:"summary"` // one line for people
	Gauges  []Gauge `json:"gauges"`
}

// Gauge is one metric against its thresholds. Positions are percentages of
// the gauge's scale (the hard cap when set, else past the last line).
type Gauge struct {
	Metric   string `json:"metric"`
	Used     string `json:"used"`
	Enforced bool   `json:"enforced"`
	// Note says why a metric is not enforced, or what the bar measures.
	Note    string  `json:"note"`
	Tier    string  `json:"tier"` // this metric's own tier
	Fill    float64 `json:"fill"` // 0–100
	Optimal *Line   `json:"optimal,omitempty"`
	Warning *Line   `json:"warning,omitempty"`
	Hard    *Line   `json:"hard,omitempty"`
	// Label is the whole gauge in words, for screen readers and for anyone
	// who does not read colour.
	Label string `json:"label"`
}

// Line is a threshold drawn on a gauge.
type Line struct {
	Value string  `json:"value"`
	At    float64 `json:"at"` // 0–100
}

// TaskView is one task and its history.
type TaskView struct {
	ID       string        `json:"id"`
	Goal     string        `json:"goal"`
	State    string        `json:"state"`
	Reason   string        `json:"reason"`
	Updated  time.Time     `json:"updated"`
	Budget   BudgetView    `json:"budget"`
	Spend    []SpendPoint  `json:"spend"`
	Degrades []DegradeView `json:"degrades"`
	Calls    []CallView    `json:"calls"`
	// Models breaks the task's spend down by model; Agents by who spent it
	// (the main agent and its sub-agents), empty when only the main agent
	// spent, as BUDGET.md's Per sub-agent section is.
	Models []SpendShare   `json:"models"`
	Agents []SpendShare   `json:"agents"`
	Docs   []ArtifactView `json:"docs"`
	// Forecast is the spend forecast of a task not DONE, when the server
	// has a forecaster; ForecastText says it in one line.
	Forecast     *purser.SpendForecast `json:"forecast,omitempty"`
	ForecastText string                `json:"forecastText,omitempty"`
}

// SpendShare is the part of a task's spend one model or agent accounts for.
type SpendShare struct {
	Name   string `json:"name"`
	Calls  int    `json:"calls"`
	Tokens int64  `json:"tokens"`
	Money  string `json:"money"` // budget.FormatUSD: labelled by source, "unknown" never $0
}

// SpendPoint is the task's cumulative spend after one ledger entry.
type SpendPoint struct {
	At     time.Time `json:"at"`
	USD    float64   `json:"usd"` // for plotting only; Label is the exact figure
	Tokens int64     `json:"tokens"`
	Label  string    `json:"label"`
}

// DegradeView is a degrade action on the timeline.
type DegradeView struct {
	At        time.Time `json:"at"`
	Iteration int       `json:"iteration"`
	Action    string    `json:"action"`
	Tier      string    `json:"tier"`
	Metric    string    `json:"metric"`
	Scope     string    `json:"scope"`
	Why       string    `json:"why"`
}

// CallView is one backend call.
type CallView struct {
	ID        string    `json:"id"`
	Iteration int       `json:"iteration"`
	Kind      string    `json:"kind"`
	Attempt   int       `json:"attempt"`
	Model     string    `json:"model"`
	Started   time.Time `json:"started"`
	Duration  string    `json:"duration"`
	Outcome   string    `json:"outcome"`
	Tokens    int64     `json:"tokens"`
	Money     string    `json:"money"`
	Source    string    `json:"source"` // reported, estimated, unknown, none
	Error     string    `json:"error"`
}

// ArtifactView is STATUS.md or BUDGET.md, as text.
type ArtifactView struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// artifactNames are the documents the engine writes for every task.
var artifactNames = []string{"STATUS.md", "BUDGET.md"}

// Load reads a snapshot from the store.
func Load(ctx context.Context, s purser.StoreReader) (Snapshot, error) {
	tasks, err := s.Tasks(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("read tasks: %w", err)
	}
	byRun := map[string]*RunView{}
	var order []string
	for _, rec := range tasks {
		rv := byRun[rec.RunID]
		if rv == nil {
			rv = &RunView{ID: rec.RunID, Tasks: []TaskView{}}
			if rv.Budget, err = runBudget(ctx, s, rec.RunID); err != nil {
				return Snapshot{}, err
			}
			byRun[rec.RunID] = rv
			order = append(order, rec.RunID)
		}
		tv, err := loadTask(ctx, s, rec)
		if err != nil {
			return Snapshot{}, err
		}
		rv.Tasks = append(rv.Tasks, tv)
	}
	snap := Snapshot{Runs: []RunView{}, Budgets: []report.BudgetTreeJSON{}}
	for _, id := range order {
		rv := byRun[id]
		slices.SortStableFunc(rv.Tasks, func(a, b TaskView) int { return strings.Compare(a.ID, b.ID) })
		snap.Runs = append(snap.Runs, *rv)
	}
	// Newest run first: the one being watched is usually the latest.
	slices.SortStableFunc(snap.Runs, func(a, b RunView) int { return -cmp.Compare(latest(a), latest(b)) })
	return snap, nil
}

func latest(r RunView) int64 {
	var t int64
	for _, tv := range r.Tasks {
		t = max(t, tv.Updated.UnixNano())
	}
	return t
}

func runBudget(ctx context.Context, s purser.StoreReader, runID string) (*BudgetView, error) {
	run, err := s.Run(ctx, runID)
	if errors.Is(err, purser.ErrNotFound) || (err == nil && run.Budget == nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", runID, err)
	}
	totals, err := s.RunUsageTotals(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("read usage of run %s: %w", runID, err)
	}
	st, err := report.TotalsStatus(*run.Budget, totals, run.Elapsed)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	bv := budgetView(*run.Budget, st)
	return &bv, nil
}

func loadTask(ctx context.Context, s purser.StoreReader, rec purser.TaskRecord) (TaskView, error) {
	tv := TaskView{ID: rec.ID, Goal: redact.String(rec.Goal), State: string(rec.State), Reason: redact.String(rec.Reason),
		Updated: rec.UpdatedAt, Spend: []SpendPoint{}, Degrades: []DegradeView{}, Calls: []CallView{},
		Models: []SpendShare{}, Agents: []SpendShare{}, Docs: []ArtifactView{}}
	totals, err := s.UsageTotals(ctx, rec.ID)
	if err != nil {
		return tv, fmt.Errorf("read usage totals of task %s: %w", rec.ID, err)
	}
	st, err := report.TotalsStatus(rec.Budget, totals, rec.Elapsed)
	if err != nil {
		return tv, fmt.Errorf("task %s: %w", rec.ID, err)
	}
	tv.Budget = budgetView(rec.Budget, st)
	// What each call spent, from the store's per-call running totals: the
	// page costs the same after ten events as after a million.
	shares, err := s.CallUsage(ctx, rec.ID)
	if err != nil {
		return tv, fmt.Errorf("read usage per call of task %s: %w", rec.ID, err)
	}
	perCall, callOrder := callTotals(shares)
	degrades, err := s.Degrades(ctx, rec.ID)
	if err != nil {
		return tv, fmt.Errorf("read degrade actions of task %s: %w", rec.ID, err)
	}
	for _, d := range degrades {
		tv.Degrades = append(tv.Degrades, DegradeView{At: d.At, Iteration: d.Iteration, Action: string(d.Action),
			Tier: strings.ToUpper(d.Tier.String()), Metric: d.Metric.String(), Scope: d.Scope.String(), Why: redact.String(d.Detail)})
	}
	calls, err := s.Calls(ctx, rec.ID)
	if err != nil {
		return tv, fmt.Errorf("read calls of task %s: %w", rec.ID, err)
	}
	for _, c := range calls {
		cv := CallView{ID: c.ID, Iteration: c.Iteration, Kind: string(c.Kind), Attempt: c.Attempt, Model: c.Model,
			Started: c.StartedAt, Outcome: string(c.Outcome), Error: redact.String(c.Error), Source: "none", Money: "-"}
		if !c.EndedAt.IsZero() {
			cv.Duration = c.EndedAt.Sub(c.StartedAt).Round(time.Millisecond).String()
		}
		if t := perCall[c.ID]; t != nil {
			cv.Tokens = t.Tokens
			cv.Money = budget.FormatUSD(t.USD, t.USDSource())
			if t.ReportedEvents+t.EstimatedEvents+t.UnknownEvents > 0 {
				cv.Source = t.USDSource().String()
			}
		}
		tv.Calls = append(tv.Calls, cv)
	}
	tv.Spend = thin(spendPoints(rec, totals, calls, perCall, callOrder), maxSpendPoints)
	tv.Models = spendShares(shares, func(u purser.CallUsage) string { return u.Model })
	if agents := spendShares(shares, agentName); len(agents) > 1 || len(agents) == 1 && agents[0].Name != report.MainAgent {
		tv.Agents = agents
	}
	for _, name := range artifactNames {
		body, err := s.Artifact(ctx, rec.ID, name)
		if errors.Is(err, purser.ErrNotFound) {
			continue // written when the task stops
		}
		if err != nil {
			return tv, fmt.Errorf("read %s of task %s: %w", name, rec.ID, err)
		}
		tv.Docs = append(tv.Docs, ArtifactView{Name: name, Text: redact.String(string(body))})
	}
	return tv, nil
}

// agentName is who spent a call's usage, named as BUDGET.md names it.
func agentName(u purser.CallUsage) string {
	if u.Agent == "" {
		return report.MainAgent
	}
	return redact.String(u.Agent)
}

// spendShares sums the calls' usage by a key, in first-seen order.
func spendShares(usage []purser.CallUsage, key func(purser.CallUsage) string) []SpendShare {
	out := []SpendShare{}
	type sum struct {
		calls  map[string]bool
		totals budget.Totals
	}
	var order []string
	sums := map[string]*sum{}
	for _, u := range usage {
		k := key(u)
		if sums[k] == nil {
			sums[k] = &sum{calls: map[string]bool{}}
			order = append(order, k)
		}
		sums[k].calls[u.CallID] = true
		sums[k].totals.Merge(u.Totals)
	}
	for _, k := range order {
		t := sums[k].totals
		out = append(out, SpendShare{Name: k, Calls: len(sums[k].calls), Tokens: t.Tokens, Money: budget.FormatUSD(t.USD, t.USDSource())})
	}
	return out
}

// callTotals sums each call's usage over its models and agents, and lists
// the calls in the order they first reported usage.
func callTotals(usage []purser.CallUsage) (map[string]*budget.Totals, []string) {
	out := map[string]*budget.Totals{}
	var order []string
	for _, u := range usage {
		if u.CallID == "" {
			continue // usage outside any call: in the task's totals only
		}
		t := out[u.CallID]
		if t == nil {
			t = &budget.Totals{}
			out[u.CallID] = t
			order = append(order, u.CallID)
		}
		t.Merge(u.Totals)
	}
	return out, order
}

// spendPoints is the task's cumulative spend after each call that spent,
// placed when the call ended (started, while it runs) and in that order,
// and a last point at the task's totals when usage outside any call (or
// of a call the store has no record of) adds to them: a point per call,
// not per ledger event, so the chart costs what the call list does.
func spendPoints(rec purser.TaskRecord, totals budget.Totals, calls []purser.CallRecord, perCall map[string]*budget.Totals, order []string) []SpendPoint {
	type spent struct {
		at     time.Time
		totals budget.Totals
	}
	when := make(map[string]time.Time, len(calls))
	for _, c := range calls {
		when[c.ID] = c.StartedAt
		if !c.EndedAt.IsZero() {
			when[c.ID] = c.EndedAt
		}
	}
	var steps []spent
	for _, id := range order {
		t := *perCall[id]
		at, known := when[id]
		if !known || t.Tokens == 0 && t.ReportedEvents+t.EstimatedEvents+t.UnknownEvents+t.ListEvents == 0 {
			continue // spent nothing, or placed with the task's last point
		}
		steps = append(steps, spent{at: at, totals: t})
	}
	slices.SortStableFunc(steps, func(a, b spent) int { return a.at.Compare(b.at) })
	points := []SpendPoint{}
	var running budget.Totals
	point := func(at time.Time, t budget.Totals) {
		points = append(points, SpendPoint{At: at, USD: t.USD.Float(), Tokens: t.Tokens, Label: budget.FormatUSD(t.USD, t.USDSource())})
	}
	for _, s := range steps {
		running.Merge(s.totals)
		point(s.at, running)
	}
	totals.Time, totals.Iterations = 0, 0
	running.Time, running.Iterations = 0, 0
	if running != totals && (totals.Tokens > 0 || totals.ReportedEvents+totals.EstimatedEvents+totals.UnknownEvents+totals.ListEvents > 0) {
		at := rec.UpdatedAt
		if n := len(points); n > 0 && points[n-1].At.After(at) {
			at = points[n-1].At
		}
		point(at, totals)
	}
	return points
}

// maxSpendPoints bounds the spend chart's points: a long task's ledger
// holds an entry per streamed usage chunk, more than a chart can show.
const maxSpendPoints = 400

// thin keeps at most n points, evenly spread, the first and last among them.
func thin(points []SpendPoint, n int) []SpendPoint {
	if len(points) <= n {
		return points
	}
	out := make([]SpendPoint, 0, n)
	for i := range n - 1 {
		out = append(out, points[i*(len(points)-1)/(n-1)])
	}
	return append(out, points[len(points)-1])
}

// budgetView draws a budget's status (report.TotalsStatus), a gauge per
// metric.
func budgetView(cfg budget.Config, st budget.Status) BudgetView {
	bv := BudgetView{Tier: strings.ToUpper(st.Tier.String()), Money: budget.FormatUSD(st.UsedUSD, st.USDSource)}
	if st.Tier != budget.Optimal {
		bv.Cause = st.Cause.String()
	}
	bv.Summary = bv.Tier
	if bv.Cause != "" {
		bv.Summary += " (by " + bv.Cause + ")"
	}
	for _, metric := range budget.Metrics {
		bv.Gauges = append(bv.Gauges, gauge(cfg, st, metric))
	}
	return bv
}

func gauge(cfg budget.Config, st budget.Status, m budget.Metric) Gauge {
	used := st.Used(m)
	g := Gauge{Metric: m.String(), Used: m.Format(used)}
	if m == budget.Money {
		g.Used = budget.FormatUSD(st.UsedUSD, st.USDSource)
	}
	bar, ok := report.BarFor(cfg, st, m)
	switch {
	case !ok:
		g.Note = "not enforced"
		g.Label = fmt.Sprintf("%s: %s used, not enforced", g.Metric, g.Used)
		return g
	case m == budget.Money && st.USDSource == budget.SourceUnknown:
		g.Note = "not enforced: no dollar figure is known"
		g.Label = fmt.Sprintf("%s: unknown, not enforced: no dollar figure is known", g.Metric)
		return g
	}
	g.Enforced = true
	// The bar's own words ("… 62.0% of hard"), without its ASCII drawing.
	if i := strings.Index(bar, "] "); i >= 0 {
		g.Note = strings.TrimSpace(bar[i+2:])
	}
	g.Tier = strings.ToUpper(cfg.MetricTier(m, used).String())
	// The scale: the hard cap when there is one, else a quarter past the
	// last line, so that every line and the fill fit.
	scale, hasHard := cfg.Threshold(budget.Hard, m)
	if !hasHard {
		for _, t := range []budget.Tier{budget.Optimal, budget.Warning} {
			if v, set := cfg.Threshold(t, m); set {
				scale = max(scale, v+v/4)
			}
		}
	}
	at := func(v int64) float64 {
		if scale <= 0 {
			return 100
		}
		return min(100, max(0, float64(v)*100/float64(scale)))
	}
	g.Fill = at(used)
	parts := []string{fmt.Sprintf("%s: %s used, tier %s", g.Metric, g.Used, g.Tier)}
	for _, t := range []budget.Tier{budget.Optimal, budget.Warning, budget.Hard} {
		v, set := cfg.Threshold(t, m)
		if !set {
			continue
		}
		l := &Line{Value: m.Format(v), At: at(v)}
		switch t {
		case budget.Optimal:
			g.Optimal = l
		case budget.Warning:
			g.Warning = l
		case budget.Hard:
			g.Hard = l
		}
		parts = append(parts, t.String()+" line "+l.Value)
	}
	if g.Note != "" {
		parts = append(parts, g.Note)
	}
	g.Label = strings.Join(parts, "; ")
	return g
}
