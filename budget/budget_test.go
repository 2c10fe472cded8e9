package budget_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/purser-dev/purser/budget"
)

// fakeClock is a Clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func usd(s string) *budget.USD {
	v, err := budget.ParseUSD(s)
	if err != nil {
		panic(err)
	}
	return &v
}

func ptr[T any](v T) *T { return &v }

func mustUSD(t *testing.T, s string) budget.USD {
	t.Helper()
	v, err := budget.ParseUSD(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// specUSDBudget is the spec's running example: optimal 1.2, warning 2.0, hard 3.0.
func specUSDBudget() budget.Config {
	return budget.Config{
		Optimal: budget.Limits{USD: usd("1.2")},
		Warning: budget.Limits{USD: usd("2.0")},
		Hard:    budget.HardLimits{USD: usd("3.0"), MaxIterations: ptr(100)},
	}
}

func newManager(t *testing.T, cfg budget.Config, opts budget.Options) *budget.Manager {
	t.Helper()
	m, err := budget.NewManager(cfg, opts)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	return m
}

func spend(s budget.USD) budget.UsageEvent {
	return budget.UsageEvent{USD: s, CostSource: budget.CostReported}
}

// The spec's three Budget State Tracking scenarios, plus the edges around them.
func TestBudgetStateTracking(t *testing.T) {
	tests := []struct {
		name     string
		cfg      budget.Config
		spent    string
		wantTier budget.Tier
	}{
		{"task within optimal range: $0.80", specUSDBudget(), "0.80", budget.Optimal},
		{"just under optimal: $1.199999999", specUSDBudget(), "1.199999999", budget.Optimal},
		{"optimal line itself is WARNING: $1.20", specUSDBudget(), "1.20", budget.Warning},
		{"task enters warning range: $1.25", specUSDBudget(), "1.25", budget.Warning},
		{"past the warning line: $2.50", specUSDBudget(), "2.50", budget.Warning},
		{"task hits hard cap: $3.00", specUSDBudget(), "3.00", budget.Hard},
		{"beyond hard cap: $3.01", specUSDBudget(), "3.01", budget.Hard},
		{"task hits hard cap with hard only: $3.00", budget.Config{Hard: budget.HardLimits{USD: usd("3.0"), MaxIterations: ptr(5)}}, "3.00", budget.Hard},
		{"hard only stays OPTIMAL below the cap: $2.99", budget.Config{Hard: budget.HardLimits{USD: usd("3.0"), MaxIterations: ptr(5)}}, "2.99", budget.Optimal},
		{"no optimal: WARNING starts at warning", budget.Config{Warning: budget.Limits{USD: usd("2")}, Hard: budget.HardLimits{USD: usd("3"), MaxIterations: ptr(5)}}, "1.99", budget.Optimal},
		{"no optimal: at warning is WARNING", budget.Config{Warning: budget.Limits{USD: usd("2")}, Hard: budget.HardLimits{USD: usd("3"), MaxIterations: ptr(5)}}, "2", budget.Warning},
		{"no hard money cap: WARNING forever", budget.Config{Optimal: budget.Limits{USD: usd("1")}, Hard: budget.HardLimits{MaxIterations: ptr(5)}}, "1000", budget.Warning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, tt.cfg, budget.Options{})
			m.RecordUsage(spend(mustUSD(t, tt.spent)))
			st := m.Status()
			if st.Tier != tt.wantTier {
				t.Fatalf("tier = %s, want %s (status %+v)", st.Tier, tt.wantTier, st)
			}
			if st.IsInWarning != (tt.wantTier == budget.Warning) || st.IsAtHardCap != (tt.wantTier == budget.Hard) {
				t.Fatalf("isInWarning=%v isAtHardCap=%v for tier %s", st.IsInWarning, st.IsAtHardCap, st.Tier)
			}
			if got := m.ShouldApplyDegrade(); got != (tt.wantTier >= budget.Warning) {
				t.Fatalf("ShouldApplyDegrade = %v in %s", got, st.Tier)
			}
			if got := m.ShouldStop(); got != (tt.wantTier == budget.Hard) {
				t.Fatalf("ShouldStop = %v in %s", got, st.Tier)
			}
			if tt.wantTier != budget.Optimal && st.Cause != budget.Money {
				t.Fatalf("cause = %s, want money", st.Cause)
			}
		})
	}
}

// Money is exact: thirty events of $0.10 reach the $3.00 hard cap, twelve
// reach the $1.20 optimal line. A float64 sum gives 3.0000000000000013.
func TestMoneyIsExact(t *testing.T) {
	var f float64
	for range 30 {
		f += 0.10
	}
	if f == 3.0 {
		t.Fatalf("float sanity: expected float accumulation to be inexact, got %v", f)
	}
	tenCents := mustUSD(t, "0.10")
	hard := newManager(t, budget.Config{Hard: budget.HardLimits{USD: usd("3.0"), MaxIterations: ptr(1000)}}, budget.Options{})
	for range 30 {
		hard.RecordUsage(spend(tenCents))
	}
	if st := hard.Status(); st.Tier != budget.Hard || st.UsedUSD != budget.Dollars(3) {
		t.Fatalf("30 x $0.10: tier %s used %s, want hard and $3.00", st.Tier, st.UsedUSD)
	}
	opt := newManager(t, budget.Config{Optimal: budget.Limits{USD: usd("1.2")}, Hard: budget.HardLimits{MaxIterations: ptr(1000)}}, budget.Options{})
	for range 12 {
		opt.RecordUsage(spend(tenCents))
	}
	if st := opt.Status(); st.Tier != budget.Warning {
		t.Fatalf("12 x $0.10 against optimal $1.20: tier %s, want warning", st.Tier)
	}
}

// Backend has no reliable USD pricing: tokens, time and iterations are still
// enforced, and the money figure is labelled.
func TestBackendHasNoReliableUSDPricing(t *testing.T) {
	cfg := budget.Config{
		Optimal: budget.Limits{USD: usd("1"), Tokens: ptr[int64](1000)},
		Hard:    budget.HardLimits{USD: usd("2"), Tokens: ptr[int64](2000), MaxIterations: ptr(10)},
	}
	m := newManager(t, cfg, budget.Options{})
	m.RecordUsage(budget.UsageEvent{InputTokens: 1200, CostSource: budget.CostUnknown})
	st := m.Status()
	if st.Tier != budget.Warning || st.Cause != budget.Tokens {
		t.Fatalf("tokens in WARNING while USD unknown: tier %s by %s, want warning by tokens", st.Tier, st.Cause)
	}
	if st.USDSource != budget.SourceUnknown {
		t.Fatalf("usdSource = %s, want unknown", st.USDSource)
	}
	if st.USDPctOfHard.Valid || st.USDPctOfOptimal.Valid {
		t.Fatalf("money percentages must be null when no dollar figure is known: %+v %+v", st.USDPctOfOptimal, st.USDPctOfHard)
	}
	m.RecordUsage(budget.UsageEvent{OutputTokens: 800, CostSource: budget.CostUnknown})
	if st := m.Status(); st.Tier != budget.Hard || st.Cause != budget.Tokens {
		t.Fatalf("tier %s by %s, want hard by tokens", st.Tier, st.Cause)
	}

	// Partial: the known part is still enforced.
	p := newManager(t, cfg, budget.Options{})
	p.RecordUsage(budget.UsageEvent{InputTokens: 10, CostSource: budget.CostUnknown})
	p.RecordUsage(budget.UsageEvent{InputTokens: 10, USD: budget.Dollars(2), CostSource: budget.CostEstimated})
	st = p.Status()
	if st.USDSource != budget.SourcePartial || st.Tier != budget.Hard || st.Cause != budget.Money {
		t.Fatalf("partial: source %s tier %s by %s, want partial, hard by money", st.USDSource, st.Tier, st.Cause)
	}
}

func TestUSDSourceLabels(t *testing.T) {
	tests := []struct {
		name    string
		sources []budget.CostSource
		want    budget.USDSource
	}{
		{"all reported", []budget.CostSource{budget.CostReported, budget.CostReported}, budget.SourceReported},
		{"some estimated", []budget.CostSource{budget.CostReported, budget.CostEstimated}, budget.SourceEstimated},
		{"some unknown", []budget.CostSource{budget.CostEstimated, budget.CostUnknown}, budget.SourcePartial},
		{"all unknown", []budget.CostSource{budget.CostUnknown}, budget.SourceUnknown},
		{"time-only events make no money claim", []budget.CostSource{budget.CostReported, budget.CostNone}, budget.SourceReported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, specUSDBudget(), budget.Options{})
			for _, s := range tt.sources {
				m.RecordUsage(budget.UsageEvent{InputTokens: 1, USD: 1, CostSource: s})
			}
			if got := m.Status().USDSource; got != tt.want {
				t.Fatalf("usdSource = %s, want %s", got, tt.want)
			}
		})
	}
}

// Tokens-only budget: tiers come from tokens alone.
func TestTokensOnlyBudget(t *testing.T) {
	cfg := budget.Config{
		Optimal: budget.Limits{Tokens: ptr[int64](10_000)},
		Hard:    budget.HardLimits{Tokens: ptr[int64](50_000), MaxIterations: ptr(5)},
	}
	m := newManager(t, cfg, budget.Options{})
	steps := []struct {
		ev   budget.UsageEvent
		want budget.Tier
	}{
		{budget.UsageEvent{InputTokens: 6000, CacheReadTokens: 5000, OutputTokens: 1000}, budget.Optimal},
		{budget.UsageEvent{InputTokens: 2000, OutputTokens: 1000, ReasoningTokens: 900}, budget.Warning}, // 10,000: cached and reasoning tokens count
		{budget.UsageEvent{InputTokens: 39_999}, budget.Warning},
		{budget.UsageEvent{OutputTokens: 1}, budget.Hard},
	}
	for i, s := range steps {
		if got := m.RecordUsage(s.ev); got != s.want {
			t.Fatalf("after event %d: tier %s, want %s", i, got, s.want)
		}
	}
	st := m.Status()
	if st.UsedTokens != 50_000 || st.Cause != budget.Tokens {
		t.Fatalf("used %d tokens by %s, want 50000 by tokens", st.UsedTokens, st.Cause)
	}
	if st.USDPctOfHard.Valid || !st.TokensPctOfHard.Valid || st.TokensPctOfHard.Value != 100 {
		t.Fatalf("percentages: usd %+v tokens %+v", st.USDPctOfHard, st.TokensPctOfHard)
	}
}

// maxIterations: 3 allows exactly three iterations; an iteration counts when it ends.
func TestIterationsCountWhenTheyEnd(t *testing.T) {
	m := newManager(t, budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(3)}}, budget.Options{})
	for i := 1; i <= 3; i++ {
		if err := m.Check(); err != nil {
			t.Fatalf("iteration %d refused: %v", i, err)
		}
		m.RecordUsage(budget.UsageEvent{InputTokens: 100}) // mid-iteration usage does not count as one
		if got := m.Status().UsedIterations; got != i-1 {
			t.Fatalf("mid-iteration %d: used %d iterations", i, got)
		}
		m.RecordUsage(budget.UsageEvent{IterationEnd: true})
	}
	err := m.Check()
	var be *budget.BudgetExhaustedError
	if !errors.As(err, &be) {
		t.Fatalf("fourth iteration: err = %v, want BudgetExhaustedError", err)
	}
	if be.Metric != budget.Iterations || be.Scope != budget.ScopeTask || be.Limit != 3 {
		t.Fatalf("exhausted by %s in %s scope with limit %d", be.Metric, be.Scope, be.Limit)
	}
}

// Wall time accumulates across resumes from the injected clock.
func TestWallTimeFromInjectedClock(t *testing.T) {
	clock := newFakeClock()
	cfg := budget.Config{
		Optimal: budget.Limits{TimeMinutes: ptr(budget.Minutes(10 * time.Minute))},
		Hard:    budget.HardLimits{TimeMinutes: ptr(budget.Minutes(30 * time.Minute)), MaxIterations: ptr(5)},
	}
	m := newManager(t, cfg, budget.Options{Clock: clock})
	var changes []budget.Change
	m.OnChange(func(c budget.Change) { changes = append(changes, c) })

	m.StartClock()
	clock.Advance(9 * time.Minute)
	if m.Tier() != budget.Optimal {
		t.Fatalf("9 min: %s", m.Tier())
	}
	clock.Advance(time.Minute)
	if m.Tier() != budget.Warning {
		t.Fatalf("10 min: %s", m.Tier())
	}
	m.StopClock()
	clock.Advance(time.Hour) // paused: not counted
	if got := m.Status().UsedTime; got != 10*time.Minute {
		t.Fatalf("paused: used %s, want 10m", got)
	}
	m.StartClock()
	deadline, ok := m.HardDeadline()
	if !ok || !deadline.Equal(clock.Now().Add(20*time.Minute)) {
		t.Fatalf("hard deadline %v %v, want now+20m", deadline, ok)
	}
	clock.Advance(20 * time.Minute)
	st := m.Status()
	if st.Tier != budget.Hard || st.Cause != budget.Time || st.UsedTime != 30*time.Minute {
		t.Fatalf("30 min: tier %s by %s used %s", st.Tier, st.Cause, st.UsedTime)
	}
	if len(changes) != 2 || changes[0].To != budget.Warning || changes[1].To != budget.Hard {
		t.Fatalf("changes = %+v, want warning then hard", changes)
	}

	resumed := newManager(t, cfg, budget.Options{Clock: clock, Initial: m.Totals()})
	if got := resumed.Status().UsedTime; got != 30*time.Minute {
		t.Fatalf("resumed with %s, want 30m carried over", got)
	}
}

// Percent fields are used/threshold×100 and null where not configured.
func TestStatusPercentages(t *testing.T) {
	cfg := budget.Config{
		Optimal: budget.Limits{USD: usd("2"), Tokens: ptr[int64](1000)},
		Hard:    budget.HardLimits{USD: usd("4"), MaxIterations: ptr(5)},
	}
	m := newManager(t, cfg, budget.Options{})
	m.RecordUsage(budget.UsageEvent{InputTokens: 250, USD: budget.Dollars(1), CostSource: budget.CostReported})
	st := m.Status()
	check := func(name string, p budget.Percent, want float64, valid bool) {
		t.Helper()
		if p.Valid != valid || (valid && p.Value != want) {
			t.Errorf("%s = %+v, want %v (valid %v)", name, p, want, valid)
		}
	}
	check("usdPctOfOptimal", st.USDPctOfOptimal, 50, true)
	check("usdPctOfHard", st.USDPctOfHard, 25, true)
	check("tokensPctOfOptimal", st.TokensPctOfOptimal, 25, true)
	check("tokensPctOfHard", st.TokensPctOfHard, 0, false)
	check("timePctOfOptimal", st.TimePctOfOptimal, 0, false)
	check("timePctOfHard", st.TimePctOfHard, 0, false)
}

// Staged degrade: WARNING starts at optimal; the warning line is later.
func TestPastWarningLine(t *testing.T) {
	m := newManager(t, specUSDBudget(), budget.Options{})
	m.RecordUsage(spend(mustUSD(t, "1.5")))
	if st := m.Status(); st.Tier != budget.Warning || st.PastWarningLine {
		t.Fatalf("$1.50: tier %s pastWarningLine %v, want warning, false", st.Tier, st.PastWarningLine)
	}
	m.RecordUsage(spend(mustUSD(t, "0.5")))
	if st := m.Status(); !st.PastWarningLine {
		t.Fatalf("$2.00: pastWarningLine false")
	}
}

// Scopes: recording on a task records on its run; either at HARD stops.
func TestRunScope(t *testing.T) {
	run := newManager(t, budget.Config{
		Optimal: budget.Limits{USD: usd("1")},
		Hard:    budget.HardLimits{USD: usd("2"), MaxIterations: ptr(100)},
	}, budget.Options{Scope: budget.ScopeRun})
	taskCfg := budget.Config{Hard: budget.HardLimits{USD: usd("10"), MaxIterations: ptr(100)}}
	a := newManager(t, taskCfg, budget.Options{Parent: run})
	b := newManager(t, taskCfg, budget.Options{Parent: run})

	a.RecordUsage(spend(budget.Dollars(1)))
	if a.GetTier(budget.ScopeTask) != budget.Optimal || a.GetTier(budget.ScopeRun) != budget.Warning {
		t.Fatalf("task %s run %s, want optimal, warning", a.GetTier(budget.ScopeTask), a.GetTier(budget.ScopeRun))
	}
	if !b.ShouldApplyDegrade() {
		t.Fatal("task b must degrade while its run is in WARNING")
	}
	b.RecordUsage(spend(budget.Dollars(1)))
	err := a.Check()
	var be *budget.BudgetExhaustedError
	if !errors.As(err, &be) || be.Scope != budget.ScopeRun || be.Metric != budget.Money {
		t.Fatalf("a.Check() = %v, want run money exhaustion", err)
	}
	if !a.ShouldStop() || !b.ShouldStop() {
		t.Fatal("both tasks must stop when the run is at HARD")
	}
	if got := run.Status().UsedUSD; got != budget.Dollars(2) {
		t.Fatalf("run used %s, want $2.00", got)
	}
	solo := newManager(t, taskCfg, budget.Options{})
	if solo.GetTier(budget.ScopeRun) != budget.Optimal {
		t.Fatal("a task without a run budget reads the run tier as optimal")
	}
}

func TestOnChangeFiresOncePerTransition(t *testing.T) {
	m := newManager(t, specUSDBudget(), budget.Options{})
	var got []budget.Tier
	cancel := m.OnChange(func(c budget.Change) {
		got = append(got, c.To)
		if c.Status.Tier != c.To {
			t.Errorf("change to %s carries status in %s", c.To, c.Status.Tier)
		}
	})
	for range 40 {
		m.RecordUsage(spend(mustUSD(t, "0.10")))
	}
	if len(got) != 2 || got[0] != budget.Warning || got[1] != budget.Hard {
		t.Fatalf("changes = %v, want [warning hard]", got)
	}
	cancel()
	m2 := newManager(t, specUSDBudget(), budget.Options{})
	calls := 0
	cancel2 := m2.OnChange(func(budget.Change) { calls++ })
	cancel2()
	m2.RecordUsage(spend(budget.Dollars(5)))
	if calls != 0 {
		t.Fatalf("cancelled listener called %d times", calls)
	}
}

// Money is shown with where it came from, and money nobody knows is never
// shown as $0.
func TestFormatUSDSaysWhereTheFigureCameFrom(t *testing.T) {
	tests := []struct {
		amount budget.USD
		source budget.USDSource
		want   string
	}{
		{budget.Dollars(1) + budget.Dollars(1)/5, budget.SourceReported, "$1.20 (reported)"},
		{budget.USD(420_000_000), budget.SourceEstimated, "$0.42 (estimated)"},
		{budget.USD(1_029_500_000), budget.SourcePartial, "≥ $1.0295 (partial: some unknown)"},
		{0, budget.SourceUnknown, "unknown"},
		{budget.Dollars(3), budget.SourceUnknown, "unknown"},
		{0, budget.SourcePartial, "≥ $0.00 (partial: some unknown)"},
		{0, budget.SourceReported, "$0.00"},
		{0, budget.SourceEstimated, "$0.00 (estimated)"},
	}
	for _, tt := range tests {
		if got := budget.FormatUSD(tt.amount, tt.source); got != tt.want {
			t.Errorf("FormatUSD(%d, %s) = %q, want %q", tt.amount, tt.source, got, tt.want)
		}
	}
}

// List-price dollars (a flat-rate plan) are recorded apart and never move a
// money tier: $50 at list under a $1 cap leaves the budget OPTIMAL, while the
// same $50 as money spent is HARD. Tokens still steer.
func TestListDollarsAreNeverCheckedAgainstTheMoneyCap(t *testing.T) {
	cfg := budget.Config{Hard: budget.HardLimits{USD: usd("1"), Tokens: ptr[int64](1000), MaxIterations: ptr(5)}}
	for _, tc := range []struct {
		name     string
		source   budget.CostSource
		wantTier budget.Tier
		wantUsed budget.USD
		wantList budget.USD
	}{
		{"a subscription's list dollars", budget.CostList, budget.Optimal, 0, *usd("50")},
		{"an API key's reported dollars", budget.CostReported, budget.Hard, *usd("50"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := budget.NewManager(cfg, budget.Options{})
			if err != nil {
				t.Fatal(err)
			}
			m.RecordUsage(budget.UsageEvent{InputTokens: 100, USD: *usd("50"), CostSource: tc.source})
			st := m.Status()
			if st.Tier != tc.wantTier || st.UsedUSD != tc.wantUsed || st.ListUSD != tc.wantList || st.USDSource != budget.SourceReported {
				t.Fatalf("tier %s, used %s, list %s, source %s; want %s, %s, %s, reported", st.Tier, st.UsedUSD, st.ListUSD, st.USDSource, tc.wantTier, tc.wantUsed, tc.wantList)
			}
			m.RecordUsage(budget.UsageEvent{InputTokens: 900, USD: *usd("1"), CostSource: tc.source})
			if err := m.Check(); err == nil {
				t.Fatal("the token cap did not stop the task")
			}
		})
	}
	ev := budget.UsageEvent{InputTokens: 1, USD: 1, CostSource: budget.CostList, SettlesUnknown: 2}
	if err := ev.Validate(); err != nil {
		t.Fatalf("a list event settling unknown ones refused: %v", err)
	}
}
