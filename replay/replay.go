// Package replay replays recorded agent runs through a budget, call by call,
// with admission checked before each call as the engine does: what a cap
// would have cost, and what it would have cut.
package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

// Call is one recorded LLM call. Input tokens include cached ones.
type Call struct {
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	ReasoningTokens  int64
	CostUSD          *budget.USD // nil: not recorded
	Model            string
	At               time.Time // zero: not recorded
}

// Run is one recorded run of an agent on a task.
type Run struct {
	InstanceID string
	System     string
	Model      string
	Resolved   *bool // nil: no label
	// Calls is empty for a run recorded with totals only; it is then
	// replayed as one call, and its saving is a lower bound.
	Calls             []Call
	TotalCostUSD      *budget.USD
	TotalInputTokens  int64
	TotalOutputTokens int64
	TotalCacheRead    int64
	WallTime          time.Duration
	// Route is how the calls reached their model, when the record says so
	// (usage_route: openrouter): calls with no recorded cost are priced by
	// that route's entries first (see pricing.ResolveRoute).
	Route pricing.Route
}

// Result is what a budget would have done to one run.
type Result struct {
	InstanceID string `json:"instanceId"`
	System     string `json:"system"`
	Model      string `json:"model"`
	Resolved   *bool  `json:"resolved"`
	Calls      int    `json:"calls"`
	// WarningAtCall is the 1-based call whose usage entered WARNING.
	WarningAtCall *int `json:"warningAtCall"`
	// StoppedAtCall is the 1-based call the budget stopped: the first call
	// not admitted, or the call that reached the hard cap exactly.
	StoppedAtCall *int `json:"stoppedAtCall"`
	// RecordedUSD is what the run spent; SpentUSD what it would have spent
	// under the budget; SavedUSD the difference.
	RecordedUSD budget.USD `json:"recordedUsd"`
	// RecordedUSDSource is the provenance of RecordedUSD: unknown when no
	// call's cost is known (RecordedUSD is then 0 and means nothing), partial
	// when it is a lower bound.
	RecordedUSDSource budget.USDSource `json:"recordedUsdSource"`
	SpentUSD          budget.USD       `json:"spentUsd"`
	SavedUSD          budget.USD       `json:"savedUsd"`
	USDSource         budget.USDSource `json:"usdSource"`
	SpentTokens       int64            `json:"spentTokens"`
	Stopped           bool             `json:"stopped"`
	SolvedCut         bool             `json:"solvedCut"`
	// TotalsOnly marks a run recorded with totals only: replayed as one call
	// clamped to the cap, its saving (total − cap) is a lower bound and its
	// stop point unknown.
	TotalsOnly bool `json:"totalsOnly"`
	// NaiveSpentUSD is what a check-then-spend rule (stop once spend has
	// reached the cap, checked before each call) would have spent.
	NaiveSpentUSD budget.USD `json:"naiveSpentUsd"`
	// PriceTables names the price tables that priced calls with no recorded
	// cost (an entry's Source: built-in with its date, or a file with its
	// SHA-256); empty when every cost was recorded.
	PriceTables []string `json:"priceTables,omitempty"`
	// CostNote says how RecordedUSD was made when it is not simply the
	// recorded costs added up: a record's total shared out over calls that
	// carry no cost, by their estimated costs.
	CostNote string `json:"costNote,omitempty"`

	recorded budget.Totals // the run's recorded usage, whose provenance a Summary adds up
}

// Summary adds results up.
type Summary struct {
	System      string     `json:"system,omitempty"`
	Model       string     `json:"model,omitempty"`
	Runs        int        `json:"runs"`
	Stopped     int        `json:"stopped"`
	SolvedCut   int        `json:"solvedCut"`
	Solved      int        `json:"solved"`
	TotalsOnly  int        `json:"totalsOnly"` // runs recorded with totals only: their savings are lower bounds
	Calls       int        `json:"calls"`
	RecordedUSD budget.USD `json:"recordedUsd"`
	SpentUSD    budget.USD `json:"spentUsd"`
	SavedUSD    budget.USD `json:"savedUsd"`
	// NaiveOvershootUSD is how far past the hard cap the check-then-spend
	// rule would have gone, summed over runs. Purser's is zero.
	NaiveOvershootUSD budget.USD `json:"naiveOvershootUsd"`
	// USDSource says where the recorded dollar figures came from, over every
	// call of every run: a total with unknown parts is a lower bound.
	USDSource budget.USDSource `json:"usdSource"`
	// PriceTables names every price table that priced a call with no
	// recorded cost, sorted; empty when every cost was recorded.
	PriceTables []string `json:"priceTables"`
	// SharedTotalRuns counts the runs whose calls carry no cost but whose
	// record gives a total: the total is kept, shared out over the calls by
	// their estimated costs (see Result.CostNote).
	SharedTotalRuns int `json:"sharedTotalRuns,omitempty"`

	recorded budget.Totals // provenance counts of every recorded call
}

// PricesLine says which price tables the summary's estimates come from, or
// that none was needed: for a report's text, beside the dollar figures.
func (s Summary) PricesLine() string {
	if len(s.PriceTables) == 0 {
		if s.recorded.UnknownEvents > 0 {
			return "prices: no price table priced any call; calls with no recorded cost are unknown"
		}
		return "prices: every cost was recorded; no price table used"
	}
	line := "prices: calls with no recorded cost estimated from " + strings.Join(s.PriceTables, "; ")
	if s.SharedTotalRuns > 0 {
		line += fmt.Sprintf(" (%d run(s) whose calls carry no cost keep their recorded total, shared out over the calls by those estimates)", s.SharedTotalRuns)
	}
	return line
}

// Report is a replay of a corpus.
type Report struct {
	Summary Summary   `json:"summary"`
	Groups  []Summary `json:"groups"`
	Runs    []Result  `json:"runs"`
}

// ReplayRun replays one run through a fresh budget. Each call is admitted
// first with its own recorded usage as the reservation — the exact worst
// case, which the engine can only bound — and refused when it would pass a
// hard cap; the run stops there. Calls without a recorded cost are priced
// from the catalogue, or unknown. Iterations are not replayed: recorded runs
// have calls, not Purser iterations.
func ReplayRun(cfg budget.Config, prices *pricing.Catalogue, r Run) (Result, error) {
	m, err := budget.NewManager(cfg, budget.Options{})
	if err != nil {
		return Result{}, err
	}
	res := Result{InstanceID: r.InstanceID, System: r.System, Model: r.Model, Resolved: r.Resolved}
	calls := r.Calls
	if len(calls) == 0 {
		res.TotalsOnly = true
		calls = []Call{{InputTokens: r.TotalInputTokens, OutputTokens: r.TotalOutputTokens, CacheReadTokens: r.TotalCacheRead,
			CostUSD: r.TotalCostUSD, Model: r.Model}}
	}
	res.Calls = len(calls)
	events, recorded, tables := recordedEvents(prices, r, calls, res.TotalsOnly)
	res.PriceTables = tables
	if !res.TotalsOnly && r.TotalCostUSD != nil && noCallCost(calls) && recorded.UnknownEvents == 0 && recorded.USD > 0 {
		// The calls carry no cost but the record gives the run's total:
		// keep it, shared out by the estimates, and say so.
		estimate := recorded.USD
		events = shareOut(events, *r.TotalCostUSD, tables)
		recorded = budget.Totals{}
		for _, ev := range events {
			recorded.Add(ev)
		}
		res.CostNote = fmt.Sprintf("the calls carry no cost: the record's total %s (reported) is shared out over them by their costs estimated from %s (%s in all), so each call's figure is estimated",
			budget.FormatUSD(*r.TotalCostUSD, budget.SourceReported), strings.Join(tables, "; "), estimate.Decimal())
	}
	res.RecordedUSD, res.RecordedUSDSource, res.recorded = recorded.USD, recorded.USDSource(), recorded
	res.NaiveSpentUSD = naiveSpend(cfg, events)
	admitEach(m, events, &res)
	st := m.Status()
	res.SpentUSD, res.SpentTokens, res.USDSource = st.UsedUSD, st.UsedTokens, st.USDSource
	res.SavedUSD = res.RecordedUSD - res.SpentUSD
	res.SolvedCut = res.Stopped && r.Resolved != nil && *r.Resolved && res.StoppedAtCall != nil &&
		(*res.StoppedAtCall < len(events) || res.TotalsOnly && res.SavedUSD > 0 || res.SpentTokens < recorded.Tokens)
	return res, nil
}

// recordedEvents turns a run's recorded calls into usage events, priced
// from the catalogue where the record has no cost, each timed from the call
// before it (a run of totals only: the run's wall time); recorded is their
// sum and tables the price tables that priced them. A call with no recorded
// cost that the catalogue cannot price, even one with no tokens, is unknown:
// never a reported $0.
func recordedEvents(prices *pricing.Catalogue, r Run, calls []Call, totalsOnly bool) (events []budget.UsageEvent, recorded budget.Totals, tables []string) {
	events = make([]budget.UsageEvent, len(calls))
	for i, c := range calls {
		ev := prices.EstimateRoute(recordedEvent(c), r.Route)
		switch ev.CostSource {
		case budget.CostEstimated:
			if e, _, ok := prices.ResolveRoute(ev.Model, r.Route); ok && !slices.Contains(tables, e.Source) {
				tables = append(tables, e.Source)
			}
		case budget.CostNone:
			// No cost recorded and no tokens to price: nobody knows what it cost.
			ev.CostSource, ev.PriceSource = budget.CostUnknown, "no cost recorded"
		}
		if i > 0 && !c.At.IsZero() && !calls[i-1].At.IsZero() {
			ev.Elapsed = max(c.At.Sub(calls[i-1].At), 0)
		}
		if totalsOnly {
			ev.Elapsed = r.WallTime
		}
		events[i] = ev
		recorded.Add(ev)
	}
	sort.Strings(tables)
	return events, recorded, tables
}

// noCallCost reports that no call carries a recorded cost.
func noCallCost(calls []Call) bool {
	for _, c := range calls {
		if c.CostUSD != nil {
			return false
		}
	}
	return true
}

// shareOut gives each estimated event its share of total, in proportion to
// its estimate, exactly: the shares are differences of the rounded-down
// running fractions total × (estimates so far) / (all estimates), so they
// add up to total to the nano-dollar.
func shareOut(events []budget.UsageEvent, total budget.USD, tables []string) []budget.UsageEvent {
	var all uint64
	for _, ev := range events {
		all += uint64(max(ev.USD, 0))
	}
	out := make([]budget.UsageEvent, len(events))
	var sofar uint64
	var given budget.USD
	for i, ev := range events {
		sofar += uint64(max(ev.USD, 0))
		hi, lo := bits.Mul64(uint64(max(total, 0)), sofar)
		upto, _ := bits.Div64(hi, lo, all) // total·sofar/all ≤ total: no overflow
		ev.USD, ev.CostSource = budget.USD(upto)-given, budget.CostEstimated
		ev.PriceSource = fmt.Sprintf("the run's recorded total %s shared out by the call's cost estimated from %s", total.Decimal(), strings.Join(tables, "; "))
		given = budget.USD(upto)
		out[i] = ev
	}
	return out
}

// recordedEvent is one recorded call's usage, its parts kept within their
// wholes (reasoning within output, cache within input), with its recorded
// cost as reported when it has one.
func recordedEvent(c Call) budget.UsageEvent {
	ev := budget.UsageEvent{InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, CacheReadTokens: c.CacheReadTokens,
		CacheWriteTokens: c.CacheWriteTokens, ReasoningTokens: min(c.ReasoningTokens, c.OutputTokens), Model: c.Model}
	if ev.CacheReadTokens+ev.CacheWriteTokens > ev.InputTokens {
		ev.CacheReadTokens, ev.CacheWriteTokens = min(ev.CacheReadTokens, ev.InputTokens), 0
	}
	if c.CostUSD != nil {
		ev.USD, ev.CostSource = *c.CostUSD, budget.CostReported
	}
	return ev
}

// admitEach admits and commits the events in turn through m, as the engine
// would, and records in res where the run entered WARNING and where (if
// anywhere) it was stopped.
func admitEach(m *budget.Manager, events []budget.UsageEvent, res *Result) {
	for i, ev := range events {
		n := i + 1
		want := budget.Amount{Tokens: ev.Tokens()}
		if ev.CostSource == budget.CostReported || ev.CostSource == budget.CostEstimated {
			want.USD = ev.USD
		}
		resv, err := m.Reserve(want)
		var short *budget.InsufficientBudgetError
		clamped := false
		if errors.As(err, &short) && res.TotalsOnly {
			// Totals only: the one "call" is clamped to what fits, so the
			// spend is the cap itself and the saving total − cap — a lower
			// bound, since admission would have stopped the run before a
			// call that crossed the cap, at or below it.
			ev = clamp(ev, short.Available)
			want = budget.Amount{USD: min(want.USD, short.Available.USD), Tokens: ev.Tokens()}
			resv, err = m.Reserve(want)
			clamped = true
		}
		if err != nil {
			res.Stopped, res.StoppedAtCall = true, &n
			break
		}
		if clamped {
			// Its recorded total passed the cap: stopped, whatever the
			// tier the clamped figures land on.
			res.Stopped, res.StoppedAtCall = true, ptr(n)
		}
		before := m.Tier()
		resv.Commit(ev)
		after := m.Tier()
		if before < budget.Warning && after >= budget.Warning {
			res.WarningAtCall = ptr(n)
		}
		if after == budget.Hard {
			res.Stopped, res.StoppedAtCall = true, ptr(n)
			if n < len(events) {
				// Reaching the cap exactly stops the run before its next call.
				break
			}
		}
		if err := m.Check(); err != nil && !res.Stopped {
			res.Stopped, res.StoppedAtCall = true, ptr(n+1)
			break
		}
	}
}

// clamp shrinks an event of totals to what is available, keeping its mix,
// in exact integer arithmetic: every part is scaled by the smallest of the
// ratios available/recorded over the capped metrics, rounded down, and the
// binding metric lands exactly on what was available (the dollars on the
// cap when money binds), so the clamped run reaches its cap.
func clamp(ev budget.UsageEvent, avail budget.Amount) budget.UsageEvent {
	num, den := int64(1), int64(1)     // the scale, num/den ≤ 1
	smaller := func(n, d int64) bool { // n/d < num/den, compared exactly
		hi1, lo1 := bits.Mul64(uint64(n), uint64(den))
		hi2, lo2 := bits.Mul64(uint64(num), uint64(d))
		return hi1 < hi2 || hi1 == hi2 && lo1 < lo2
	}
	tokensBind, usdBind := false, false
	if t := ev.Tokens(); t > 0 && avail.Tokens < t {
		num, den, tokensBind = max(avail.Tokens, 0), t, true
	}
	if ev.USD > 0 && avail.USD < ev.USD && smaller(int64(max(avail.USD, 0)), int64(ev.USD)) {
		num, den, usdBind, tokensBind = int64(max(avail.USD, 0)), int64(ev.USD), true, false
	}
	scale := func(v int64) int64 {
		if v <= 0 || num == den {
			return max(v, 0)
		}
		hi, lo := bits.Mul64(uint64(v), uint64(num))
		q, _ := bits.Div64(hi, lo, uint64(den)) // v·num/den ≤ v: no overflow
		return int64(q)
	}
	out := ev
	out.InputTokens, out.OutputTokens = scale(ev.InputTokens), scale(ev.OutputTokens)
	if tokensBind {
		// The floors may leave a token or two short of the cap: give them to
		// the output, so the clamped run reaches the token cap exactly.
		out.OutputTokens += max(avail.Tokens-out.InputTokens-out.OutputTokens, 0)
	}
	out.CacheReadTokens, out.CacheWriteTokens = min(scale(ev.CacheReadTokens), out.InputTokens), 0
	out.ReasoningTokens = min(scale(ev.ReasoningTokens), out.OutputTokens)
	switch {
	case usdBind:
		out.USD = avail.USD
	case ev.USD > 0:
		out.USD = min(budget.USD(scale(int64(ev.USD))), avail.USD)
	}
	return out
}

// naiveSpend is what the rule most tools use would have spent: before each
// call, stop if the money spent so far has reached the cap; otherwise make
// the call and add its cost afterwards.
func naiveSpend(cfg budget.Config, events []budget.UsageEvent) budget.USD {
	var spent budget.USD
	for _, ev := range events {
		if cfg.Hard.USD != nil && spent >= *cfg.Hard.USD {
			break
		}
		if ev.CostSource == budget.CostReported || ev.CostSource == budget.CostEstimated {
			spent += ev.USD
		}
	}
	return spent
}

func ptr[T any](v T) *T { return &v }

// Replay replays every run and sums the results, overall and per
// system/model.
func Replay(cfg budget.Config, prices *pricing.Catalogue, runs []Run) (Report, error) {
	rep := Report{Runs: make([]Result, 0, len(runs))}
	groups := map[[2]string]*Summary{}
	var order [][2]string
	for _, r := range runs {
		res, err := ReplayRun(cfg, prices, r)
		if err != nil {
			return rep, err
		}
		rep.Runs = append(rep.Runs, res)
		key := [2]string{r.System, r.Model}
		g := groups[key]
		if g == nil {
			g = &Summary{System: r.System, Model: r.Model}
			groups[key] = g
			order = append(order, key)
		}
		g.add(cfg, res)
		rep.Summary.add(cfg, res)
	}
	for _, k := range order {
		rep.Groups = append(rep.Groups, *groups[k])
	}
	return rep, nil
}

func (s *Summary) add(cfg budget.Config, r Result) {
	s.Runs++
	s.Calls += r.Calls
	if r.Stopped {
		s.Stopped++
	}
	if r.SolvedCut {
		s.SolvedCut++
	}
	if r.Resolved != nil && *r.Resolved {
		s.Solved++
	}
	if r.TotalsOnly {
		s.TotalsOnly++
	}
	s.RecordedUSD += r.RecordedUSD
	s.recorded.ReportedEvents += r.recorded.ReportedEvents
	s.recorded.EstimatedEvents += r.recorded.EstimatedEvents
	s.recorded.UnknownEvents += r.recorded.UnknownEvents
	s.USDSource = s.recorded.USDSource()
	for _, t := range r.PriceTables {
		if !slices.Contains(s.PriceTables, t) {
			s.PriceTables = append(s.PriceTables, t)
			sort.Strings(s.PriceTables)
		}
	}
	if r.CostNote != "" {
		s.SharedTotalRuns++
	}
	s.SpentUSD += r.SpentUSD
	s.SavedUSD += r.SavedUSD
	if cfg.Hard.USD != nil && r.NaiveSpentUSD > *cfg.Hard.USD {
		s.NaiveOvershootUSD += r.NaiveSpentUSD - *cfg.Hard.USD
	}
}

// record is one line of the corpus (see ../shared/replay/README.md).
type record struct {
	InstanceID  string       `json:"instance_id"`
	System      string       `json:"system"`
	Model       string       `json:"model"`
	Resolved    *bool        `json:"resolved"`
	Granularity string       `json:"granularity"`
	Calls       []recordCall `json:"calls"`
	TotalCost   *json.Number `json:"total_cost_usd"`
	TotalInput  *int64       `json:"total_input_tokens"`
	TotalOutput *int64       `json:"total_output_tokens"`
	TotalCache  *int64       `json:"total_cache_read_tokens"`
	WallTimeS   *float64     `json:"wall_time_s"`
	UsageRoute  string       `json:"usage_route"`
}

type recordCall struct {
	Input      *int64       `json:"input_tokens"`
	Output     *int64       `json:"output_tokens"`
	CacheRead  *int64       `json:"cache_read_tokens"`
	CacheWrite *int64       `json:"cache_write_tokens"`
	Reasoning  *int64       `json:"reasoning_tokens"`
	Cost       *json.Number `json:"cost_usd"`
	TS         *float64     `json:"ts"`
	Model      string       `json:"model"`
}

func val(p *int64) int64 {
	if p == nil || *p < 0 {
		return 0
	}
	return *p
}

func money(n *json.Number, what string) (*budget.USD, error) {
	if n == nil {
		return nil, nil
	}
	v, err := budget.ParseUSD(n.String())
	if err != nil || v < 0 {
		return nil, fmt.Errorf("%s: want a non-negative number of dollars, got %s", what, n.String())
	}
	return &v, nil
}

// MaxLine is the longest corpus line accepted.
const MaxLine = 64 << 20

// ParseFile reads a corpus file (see Parse); errors name the path.
func ParseFile(path string) ([]Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(path, f)
}

// Parse reads a corpus in the shared replay format, one run per line.
// Errors name the line.
func Parse(name string, r io.Reader) ([]Run, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), MaxLine)
	var runs []Run
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		run, err := parseRecord(b)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		runs = append(runs, run)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	return runs, nil
}

func parseRecord(b []byte) (Run, error) {
	var rec record
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&rec); err != nil {
		return Run{}, fmt.Errorf("not a run record: %w", err)
	}
	if rec.InstanceID == "" {
		return Run{}, errors.New("instance_id: is required")
	}
	run := Run{InstanceID: rec.InstanceID, System: rec.System, Model: rec.Model, Resolved: rec.Resolved,
		TotalInputTokens: val(rec.TotalInput), TotalOutputTokens: val(rec.TotalOutput), TotalCacheRead: val(rec.TotalCache)}
	var err error
	if run.TotalCostUSD, err = money(rec.TotalCost, "total_cost_usd"); err != nil {
		return Run{}, err
	}
	if route, err := pricing.ParseRoute(rec.UsageRoute); err == nil {
		run.Route = route // a route Purser has no entries for (portkey) stays unknown
	}
	if rec.WallTimeS != nil && *rec.WallTimeS > 0 && *rec.WallTimeS < 1e9 {
		run.WallTime = time.Duration(*rec.WallTimeS * float64(time.Second))
	}
	for i, c := range rec.Calls {
		call := Call{InputTokens: val(c.Input), OutputTokens: val(c.Output), CacheReadTokens: val(c.CacheRead),
			CacheWriteTokens: val(c.CacheWrite), ReasoningTokens: val(c.Reasoning), Model: c.Model}
		if call.Model == "" {
			call.Model = rec.Model
		}
		if call.CostUSD, err = money(c.Cost, fmt.Sprintf("calls[%d].cost_usd", i)); err != nil {
			return Run{}, err
		}
		if c.TS != nil && *c.TS > 0 && *c.TS < 1e12 {
			sec, frac := math.Modf(*c.TS)
			call.At = time.Unix(int64(sec), int64(frac*1e9))
		}
		run.Calls = append(run.Calls, call)
	}
	return run, nil
}

// Quantile returns the q-quantile (0..1) of sorted values, by nearest rank.
func Quantile[T int64 | budget.USD | time.Duration](sorted []T, q float64) T {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Sorted returns a sorted copy.
func Sorted[T int64 | budget.USD | time.Duration](v []T) []T {
	out := append([]T(nil), v...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
