package budget_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser/budget"
)

// Issue 15 #12: sums of huge figures saturate, never wrap. A wrapped sum
// would turn a budget at HARD back to OPTIMAL.
func TestHugeUsageSaturatesAndStaysHard(t *testing.T) {
	huge := budget.USD(math.MaxInt64 - 1)
	for _, tc := range []struct {
		name   string
		events []budget.UsageEvent
		metric budget.Metric
	}{
		{"money", []budget.UsageEvent{
			{USD: budget.Dollars(2), CostSource: budget.CostReported},
			{USD: huge, CostSource: budget.CostReported},
			{USD: huge, CostSource: budget.CostEstimated},
		}, budget.Money},
		{"tokens", []budget.UsageEvent{
			{InputTokens: 2000},
			{InputTokens: math.MaxInt64 - 1, OutputTokens: 10},
			{OutputTokens: math.MaxInt64},
		}, budget.Tokens},
		{"time", []budget.UsageEvent{
			{Elapsed: time.Hour},
			{Elapsed: time.Duration(math.MaxInt64 - 1)},
			{Elapsed: time.Duration(math.MaxInt64 - 1)},
		}, budget.Time},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := budget.Config{Optimal: budget.Limits{USD: usd("0.5"), Tokens: ptr(int64(500))},
				Hard: budget.HardLimits{USD: usd("1"), Tokens: ptr(int64(1000)), TimeMinutes: ptr(budget.Minutes(30 * time.Minute)), MaxIterations: ptr(5)}}
			m, err := budget.NewManager(cfg, budget.Options{Clock: newFakeClock()})
			if err != nil {
				t.Fatal(err)
			}
			for i, ev := range tc.events {
				if tier := m.RecordUsage(ev); tier != budget.Hard {
					t.Fatalf("after event %d the tier is %s, want HARD: a sum wrapped (status %+v)", i+1, tier, m.Status())
				}
			}
			st := m.Status()
			if st.Tier != budget.Hard || st.Cause != tc.metric {
				t.Fatalf("status %s on %s, want HARD on %s", st.Tier, st.Cause, tc.metric)
			}
			tot := m.Totals()
			if tot.USD < 0 || tot.Tokens < 0 || tot.Time < 0 {
				t.Fatalf("totals went negative: %+v", tot)
			}
			if _, err := m.Reserve(budget.Amount{}); err == nil {
				t.Fatal("a budget at HARD admitted a call")
			}
		})
	}
}

// Totals of huge events, and a resumed task's huge initial totals, stay at
// the largest figure instead of wrapping.
func TestTotalsSaturate(t *testing.T) {
	var tot budget.Totals
	for range 3 {
		tot.Add(budget.UsageEvent{InputTokens: math.MaxInt64 / 2, OutputTokens: math.MaxInt64 / 2, USD: budget.USD(math.MaxInt64 / 2),
			CostSource: budget.CostReported, Elapsed: time.Duration(math.MaxInt64 / 2)})
	}
	if tot.USD != budget.UnlimitedUSD || tot.Tokens != math.MaxInt64 || tot.Time != time.Duration(math.MaxInt64) {
		t.Fatalf("totals %+v, want each saturated at the largest value", tot)
	}
	if got := (budget.UsageEvent{InputTokens: math.MaxInt64, OutputTokens: 1}).Tokens(); got != math.MaxInt64 {
		t.Fatalf("Tokens() = %d, want saturated", got)
	}
	if err := (budget.UsageEvent{InputTokens: 10, CacheReadTokens: math.MaxInt64, CacheWriteTokens: 2}).Validate(); err == nil {
		t.Fatal("cache tokens whose sum wraps passed validation")
	}
}

func TestSaturatingArithmetic(t *testing.T) {
	const maxI, minI = math.MaxInt64, math.MinInt64
	for _, tc := range []struct {
		op         string
		a, b, want int64
	}{
		{"+", 1, 2, 3}, {"+", maxI, 1, maxI}, {"+", maxI - 1, maxI, maxI}, {"+", minI, -1, minI}, {"+", -5, 3, -2}, {"+", maxI, minI, -1},
		{"-", 5, 3, 2}, {"-", minI, 1, minI}, {"-", 0, minI, maxI}, {"-", -1, minI, maxI}, {"-", maxI, -1, maxI}, {"-", 3, maxI, 3 - maxI},
	} {
		got := budget.SatAdd(tc.a, tc.b)
		if tc.op == "-" {
			got = budget.SatSub(tc.a, tc.b)
		}
		if got != tc.want {
			t.Errorf("%d %s %d = %d, want %d", tc.a, tc.op, tc.b, got, tc.want)
		}
	}
	if got := budget.USD(math.MaxInt64 - 5).Plus(10); got != budget.UnlimitedUSD {
		t.Errorf("Plus = %d, want saturated", got)
	}
}

// A huge exponent is refused at once instead of computed: big.Rat would
// spend a fifth of a second on 1e1000000, for every such line an agent
// writes.
func TestParseUSDRefusesHugeExponents(t *testing.T) {
	for _, s := range []string{"1e1000000", "1E-1000000", "5e99999999999999999999"} {
		if _, err := budget.ParseUSD(s); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("ParseUSD(%q) = %v, want out of range", s, err)
		}
	}
	for s, want := range map[string]budget.USD{"5e-05": 50_000, "2.5E2": budget.Dollars(250), "1e-9": 1} {
		if got, err := budget.ParseUSD(s); err != nil || got != want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
}
