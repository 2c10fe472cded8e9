package budget_test

import (
	"errors"
	"math"
	"math/big"
	"slices"
	"testing"

	"github.com/purser-dev/purser/budget"
)

func TestCapsOfTakesTheHardCapsOnMoneyAndTokens(t *testing.T) {
	tests := []struct {
		name string
		cfg  budget.Config
		want budget.Amount
	}{
		{"nothing capped", budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(3)}}, budget.Unlimited},
		{"money only", budget.Config{Hard: budget.HardLimits{USD: usd("2.5")}}, budget.Amount{USD: 2_500_000_000, Tokens: math.MaxInt64}},
		{"tokens only", budget.Config{Hard: budget.HardLimits{Tokens: ptr[int64](900)}}, budget.Amount{USD: budget.UnlimitedUSD, Tokens: 900}},
		{"both", budget.Config{Hard: budget.HardLimits{USD: usd("1"), Tokens: ptr[int64](10)}}, budget.Amount{USD: budget.Dollars(1), Tokens: 10}},
		{"optimal and warning lines are not caps", budget.Config{Optimal: budget.Limits{USD: usd("1"), Tokens: ptr[int64](5)},
			Warning: budget.Limits{USD: usd("2")}}, budget.Unlimited},
		{"time and iterations are not held", budget.Config{Hard: budget.HardLimits{TimeMinutes: ptr(budget.Minutes(60e9)), MaxIterations: ptr(1)}}, budget.Unlimited},
	}
	for _, tt := range tests {
		if got := budget.CapsOf(tt.cfg); got != tt.want {
			t.Errorf("%s: CapsOf = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestHeadroomNeverNegative(t *testing.T) {
	caps := budget.Amount{USD: budget.Dollars(1), Tokens: 1000}
	tests := []struct {
		name        string
		spent, held budget.Amount
		want        budget.Amount
	}{
		{"nothing spent", budget.Amount{}, budget.Amount{}, caps},
		{"spent and held both count", budget.Amount{USD: 250_000_000, Tokens: 100}, budget.Amount{USD: 250_000_000, Tokens: 300},
			budget.Amount{USD: 500_000_000, Tokens: 600}},
		{"exactly at the cap", budget.Amount{USD: budget.Dollars(1), Tokens: 600}, budget.Amount{Tokens: 400}, budget.Amount{}},
		{"spend past the cap is nothing left, not a debt", budget.Amount{USD: budget.Dollars(3), Tokens: 5000}, budget.Amount{}, budget.Amount{}},
		{"holds past the cap too", budget.Amount{}, budget.Amount{USD: budget.Dollars(2), Tokens: 2000}, budget.Amount{}},
		{"figures that would wrap saturate", budget.Amount{USD: budget.UnlimitedUSD, Tokens: math.MaxInt64},
			budget.Amount{USD: budget.UnlimitedUSD, Tokens: math.MaxInt64}, budget.Amount{}},
	}
	for _, tt := range tests {
		got := budget.Headroom(caps, tt.spent, tt.held)
		if got != tt.want {
			t.Errorf("%s: Headroom = %+v, want %+v", tt.name, got, tt.want)
		}
		if got.USD < 0 || got.Tokens < 0 {
			t.Errorf("%s: negative headroom %+v", tt.name, got)
		}
	}
}

func TestHeadroomLeavesAnUncappedMetricUnlimited(t *testing.T) {
	spent := budget.Amount{USD: budget.Dollars(1_000_000), Tokens: 1 << 40}
	held := budget.Amount{USD: budget.Dollars(5), Tokens: 77}
	for _, tt := range []struct {
		name string
		caps budget.Amount
		want budget.Amount
	}{
		{"money uncapped", budget.Amount{USD: budget.UnlimitedUSD, Tokens: 1<<40 + 100}, budget.Amount{USD: budget.UnlimitedUSD, Tokens: 23}},
		{"tokens uncapped", budget.Amount{USD: budget.Dollars(1_000_010), Tokens: math.MaxInt64}, budget.Amount{USD: budget.Dollars(5), Tokens: math.MaxInt64}},
		{"nothing capped", budget.Unlimited, budget.Unlimited},
	} {
		if got := budget.Headroom(tt.caps, spent, held); got != tt.want {
			t.Errorf("%s: Headroom = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestFitRefusesNamingTheMetric(t *testing.T) {
	room := budget.Amount{USD: budget.Dollars(1), Tokens: 1000}
	tests := []struct {
		name   string
		want   budget.Amount
		metric budget.Metric // NoMetric: it fits
	}{
		{"within both", budget.Amount{USD: 999_999_999, Tokens: 999}, budget.NoMetric},
		{"exactly the headroom fits", room, budget.NoMetric},
		{"nothing fits in anything", budget.Amount{}, budget.NoMetric},
		{"a nano-dollar over", budget.Amount{USD: budget.Dollars(1) + 1, Tokens: 1}, budget.Money},
		{"a token over", budget.Amount{USD: 1, Tokens: 1001}, budget.Tokens},
		{"both over: money is named", budget.Amount{USD: budget.Dollars(2), Tokens: 2000}, budget.Money},
	}
	for _, tt := range tests {
		err := budget.Fit(budget.ScopeRun, tt.want, room)
		if tt.want.FitsIn(room) != (tt.metric == budget.NoMetric) {
			t.Errorf("%s: FitsIn = %v, disagrees with Fit (%v)", tt.name, tt.want.FitsIn(room), err)
		}
		if tt.metric == budget.NoMetric {
			if err != nil {
				t.Errorf("%s: Fit = %v, want nil", tt.name, err)
			}
			continue
		}
		var short *budget.InsufficientBudgetError
		if !errors.As(err, &short) || !errors.Is(err, budget.ErrInsufficientBudget) {
			t.Fatalf("%s: Fit = %v, want an InsufficientBudgetError matching ErrInsufficientBudget", tt.name, err)
		}
		if short.Metric != tt.metric || short.Scope != budget.ScopeRun || short.Want != tt.want || short.Available != room {
			t.Errorf("%s: refusal %+v, want metric %s of the run, saying %+v fits", tt.name, short, tt.metric, room)
		}
	}
}

func TestFitNamedSaysWhichBudgetRefused(t *testing.T) {
	err := budget.FitNamed("team-month", budget.Amount{Tokens: 11}, budget.Amount{USD: budget.UnlimitedUSD, Tokens: 10})
	var short *budget.InsufficientBudgetError
	if !errors.As(err, &short) {
		t.Fatalf("FitNamed = %v, want an InsufficientBudgetError", err)
	}
	if short.Scope != budget.ScopeNamed || short.Name != "team-month" || short.Metric != budget.Tokens {
		t.Errorf("refusal %+v, want tokens of named budget team-month", short)
	}
	if err := budget.FitNamed("team-month", budget.Amount{Tokens: 10}, budget.Amount{USD: budget.UnlimitedUSD, Tokens: 10}); err != nil {
		t.Errorf("a hold of exactly the headroom: %v", err)
	}
}

func TestManagerAdmitsByTheSameHeadroom(t *testing.T) {
	cfg := budget.Config{Hard: budget.HardLimits{USD: usd("1"), Tokens: ptr[int64](1000), MaxIterations: ptr(10)}}
	m := newManager(t, cfg, budget.Options{Initial: budget.Totals{USD: 300_000_000, Tokens: 200}})
	r, err := m.Reserve(budget.Amount{USD: 100_000_000, Tokens: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	want := budget.Headroom(budget.CapsOf(cfg), m.Totals().Amount(), m.Reserved())
	if got := m.Available(); got != want {
		t.Errorf("Manager.Available = %+v, Headroom of its caps, spend and holds = %+v", got, want)
	}
	if want != (budget.Amount{USD: 600_000_000, Tokens: 750}) {
		t.Errorf("headroom %+v, want $0.60 and 750 tokens", want)
	}
}

func TestTotalsAmountCountsMoneySpentNotListPrices(t *testing.T) {
	tot := budget.Totals{USD: 7, Tokens: 9, ListUSD: budget.Dollars(100), Iterations: 4}
	if got := tot.Amount(); got != (budget.Amount{USD: 7, Tokens: 9}) {
		t.Errorf("Amount = %+v, want 7 nano-dollars and 9 tokens", got)
	}
}

func TestAmountMinIsTheTighterOfEach(t *testing.T) {
	a := budget.Amount{USD: 5, Tokens: 100}
	b := budget.Amount{USD: budget.UnlimitedUSD, Tokens: 10}
	if got := a.Min(b); got != (budget.Amount{USD: 5, Tokens: 10}) {
		t.Errorf("Min = %+v", got)
	}
	if a.Min(budget.Unlimited) != a {
		t.Errorf("Unlimited must not bound anything")
	}
}

// flat prices a call at one nano-dollar a token, its input included.
func flat(input int64) func(int64) budget.Amount {
	return func(out int64) budget.Amount {
		return budget.Amount{USD: budget.USD(input + out), Tokens: input + out}
	}
}

func TestClampOutputShrinksTheCallToFit(t *testing.T) {
	tests := []struct {
		name            string
		headroom        budget.Amount
		input, reserve  int64
		wantOut         int64
		wantUSD, wantTk int64
	}{
		{"tokens uncapped: the whole reserve", budget.Unlimited, 1000, 8192, 8192, 9192, 9192},
		{"tokens capped: what is left after input", budget.Amount{USD: budget.UnlimitedUSD, Tokens: 5000}, 1000, 8192, 4000, 5000, 5000},
		{"money tighter: shrunk a quarter at a time", budget.Amount{USD: 3000, Tokens: 5000}, 1000, 8192, 1687, 2687, 2687},
		{"the least worthwhile call still fits", budget.Amount{USD: budget.UnlimitedUSD, Tokens: 1256}, 1000, 8192, 256, 1256, 1256},
	}
	for _, tt := range tests {
		want, out, err := budget.ClampOutput(tt.headroom, tt.input, tt.reserve, flat(tt.input))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if out != tt.wantOut || want != (budget.Amount{USD: budget.USD(tt.wantUSD), Tokens: tt.wantTk}) {
			t.Errorf("%s: ClampOutput = %+v, %d output tokens; want %d output tokens", tt.name, want, out, tt.wantOut)
		}
		if !want.FitsIn(tt.headroom) {
			t.Errorf("%s: %+v does not fit in %+v", tt.name, want, tt.headroom)
		}
	}
}

func TestClampOutputRefusesBelowTheLeastWorthwhileCall(t *testing.T) {
	tests := []struct {
		name     string
		headroom budget.Amount
		metric   budget.Metric
	}{
		{"too few tokens for input and the least output", budget.Amount{USD: budget.UnlimitedUSD, Tokens: 1255}, budget.Tokens},
		{"too little money", budget.Amount{USD: 1000, Tokens: 1 << 30}, budget.Money},
		{"nothing left", budget.Amount{}, budget.Money},
	}
	for _, tt := range tests {
		_, out, err := budget.ClampOutput(tt.headroom, 1000, 8192, flat(1000))
		var short *budget.InsufficientBudgetError
		if !errors.As(err, &short) {
			t.Fatalf("%s: err = %v, want an InsufficientBudgetError", tt.name, err)
		}
		least := flat(1000)(budget.MinOutputTokens)
		if out != 0 || short.Metric != tt.metric || short.Want != least || short.Available != tt.headroom {
			t.Errorf("%s: refusal %+v (output %d), want metric %s for the least call %+v", tt.name, short, out, tt.metric, least)
		}
	}
}

// Apportion's parts always sum to the whole, whatever the weights.
func TestApportionIsExact(t *testing.T) {
	tests := []struct {
		total   int64
		weights []int64
		want    []int64
	}{
		{10, []int64{1, 1, 1}, []int64{4, 3, 3}},
		{1, []int64{1, 3}, []int64{0, 1}},
		{7, []int64{0, 0}, []int64{7, 0}},
		{1_000_000_007, []int64{3, 5, 7}, []int64{200_000_001, 333_333_336, 466_666_670}},
		{0, []int64{2, 1}, []int64{0, 0}},
		{5, nil, []int64{}},
	}
	for _, tt := range tests {
		ws := make([]*big.Rat, len(tt.weights))
		for i, w := range tt.weights {
			ws[i] = big.NewRat(w, 1)
		}
		got := budget.Apportion(tt.total, ws)
		if !slices.Equal(got, tt.want) {
			t.Errorf("Apportion(%d, %v) = %v, want %v", tt.total, tt.weights, got, tt.want)
		}
	}
}

func TestTotalsMinusUndoesMerge(t *testing.T) {
	base := budget.Totals{USD: 500, Tokens: 40, Time: 7, Iterations: 2, ReportedEvents: 3, EstimatedEvents: 1, UnknownEvents: 1, ListUSD: 9, ListEvents: 1}
	for _, other := range []budget.Totals{
		{},
		{USD: 1, Tokens: 2, Iterations: 1, ReportedEvents: 1},
		{USD: budget.Dollars(3), Tokens: 1 << 40, Time: 5, Iterations: 9, EstimatedEvents: 4, UnknownEvents: 2, ListUSD: 6, ListEvents: 3},
	} {
		sum := base
		sum.Merge(other)
		if got := sum.Minus(base); got != other {
			t.Errorf("(%+v merged with %+v) minus the first = %+v, want the second", base, other, got)
		}
	}
	if got := (budget.Totals{Tokens: math.MinInt64}).Minus(budget.Totals{Tokens: 1}); got.Tokens != math.MinInt64 {
		t.Errorf("Minus wrapped: %d tokens", got.Tokens)
	}
}

// A cap the spend has reached admits nothing, even a call priced at
// nothing (its dollars unknown until spent); a metric not capped is never
// reached.
func TestReached(t *testing.T) {
	five := budget.Amount{USD: 50_000_000, Tokens: 1000}
	for _, tc := range []struct {
		caps, spent budget.Amount
		want        budget.Metric
	}{
		{five, budget.Amount{USD: 49_999_999, Tokens: 999}, budget.NoMetric},
		{five, budget.Amount{USD: 50_000_000}, budget.Money},
		{five, budget.Amount{USD: 60_000_000, Tokens: 2000}, budget.Money},
		{five, budget.Amount{Tokens: 1000}, budget.Tokens},
		{budget.Unlimited, budget.Amount{USD: 1 << 60, Tokens: 1 << 60}, budget.NoMetric},
	} {
		if got := budget.Reached(tc.caps, tc.spent); got != tc.want {
			t.Errorf("Reached(%+v, %+v) = %v, want %v", tc.caps, tc.spent, got, tc.want)
		}
	}
}
