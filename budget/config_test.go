package budget_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/purser-dev/purser/budget"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		cfg    budget.Config
		fields []string // the fields the errors must name; none for a valid config
	}{
		{"spec example", specUSDBudget(), nil},
		{"iterations only", budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(1)}}, nil},
		{"maxIterations missing", budget.Config{Hard: budget.HardLimits{USD: usd("1")}}, []string{"hard.maxIterations"}},
		{"maxIterations zero", budget.Config{Hard: budget.HardLimits{MaxIterations: ptr(0)}}, []string{"hard.maxIterations"}},
		{"zero usd", budget.Config{Optimal: budget.Limits{USD: usd("0")}, Hard: budget.HardLimits{MaxIterations: ptr(1)}}, []string{"optimal.usd"}},
		{"negative tokens", budget.Config{Warning: budget.Limits{Tokens: ptr[int64](-5)}, Hard: budget.HardLimits{MaxIterations: ptr(1)}}, []string{"warning.tokens"}},
		{"zero minutes", budget.Config{Hard: budget.HardLimits{TimeMinutes: ptr(budget.Minutes(0)), MaxIterations: ptr(1)}}, []string{"hard.timeMinutes"}},
		{"optimal above warning", budget.Config{Optimal: budget.Limits{USD: usd("2")}, Warning: budget.Limits{USD: usd("1")}, Hard: budget.HardLimits{MaxIterations: ptr(1)}}, []string{"warning.usd"}},
		{"warning above hard", budget.Config{Warning: budget.Limits{Tokens: ptr[int64](10)}, Hard: budget.HardLimits{Tokens: ptr[int64](5), MaxIterations: ptr(1)}}, []string{"hard.tokens"}},
		{"optimal above hard", budget.Config{Optimal: budget.Limits{TimeMinutes: ptr(budget.Minutes(time.Hour))}, Hard: budget.HardLimits{TimeMinutes: ptr(budget.Minutes(time.Minute)), MaxIterations: ptr(1)}}, []string{"hard.timeMinutes"}},
		{"equal thresholds are fine", budget.Config{Optimal: budget.Limits{USD: usd("1")}, Warning: budget.Limits{USD: usd("1")}, Hard: budget.HardLimits{USD: usd("1"), MaxIterations: ptr(1)}}, nil},
		{"several problems at once", budget.Config{Optimal: budget.Limits{USD: usd("-1")}}, []string{"optimal.usd", "hard.maxIterations"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.fields) == 0 {
				if err != nil {
					t.Fatalf("valid config refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid config accepted")
			}
			for _, f := range tt.fields {
				if !strings.Contains(err.Error(), f+":") {
					t.Errorf("error %q does not name %s", err, f)
				}
			}
			var ve *budget.ValidationError
			if !errors.As(err, &ve) {
				t.Errorf("error is not a *ValidationError: %T", err)
			}
			if _, err := budget.NewManager(tt.cfg, budget.Options{}); err == nil {
				t.Error("NewManager accepted an invalid config")
			}
		})
	}
}

func TestParseUSD(t *testing.T) {
	tests := []struct {
		in   string
		want budget.USD
		err  bool
	}{
		{"0.10", 100_000_000, false},
		{"3", 3_000_000_000, false},
		{"1.5e-3", 1_500_000, false},
		{"0.0000000004", 0, false}, // rounds to the nearest nano-dollar
		{"0.0000000005", 1, false},
		{"-1.25", -1_250_000_000, false},
		{"1e30", 0, true},
		{"NaN", 0, true},
		{"Inf", 0, true},
		{"abc", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := budget.ParseUSD(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestUSDFormatting(t *testing.T) {
	tests := []struct {
		in       budget.USD
		decimal  string
		readable string
	}{
		{budget.Dollars(3), "3", "$3.00"},
		{9_500_000, "0.0095", "$0.0095"},
		{1_250_000_000, "1.25", "$1.25"},
		{-1_250_000_000, "-1.25", "-$1.25"},
		{1, "0.000000001", "$0.000000001"},
		{0, "0", "$0.00"},
	}
	for _, tt := range tests {
		if got := tt.in.Decimal(); got != tt.decimal {
			t.Errorf("Decimal(%d) = %q, want %q", tt.in, got, tt.decimal)
		}
		if got := tt.in.String(); got != tt.readable {
			t.Errorf("String(%d) = %q, want %q", tt.in, got, tt.readable)
		}
		var back budget.USD
		if err := json.Unmarshal([]byte(tt.in.Decimal()), &back); err != nil || back != tt.in {
			t.Errorf("round trip of %d: %d, %v", tt.in, back, err)
		}
	}
}

// The status JSON has exactly the spec's BudgetStatus fields, camelCase, plus
// usdSource, with null for unconfigured percentages.
func TestStatusJSONShape(t *testing.T) {
	m := newManager(t, budget.Config{
		Optimal: budget.Limits{USD: usd("1.2")},
		Hard:    budget.HardLimits{USD: usd("3"), Tokens: ptr[int64](1000), MaxIterations: ptr(3)},
	}, budget.Options{})
	m.RecordUsage(budget.UsageEvent{InputTokens: 100, OutputTokens: 50, USD: mustUSD(t, "1.5"), CostSource: budget.CostReported, Elapsed: 1500 * time.Millisecond, IterationEnd: true})
	b, err := json.Marshal(m.Status())
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"tier":"warning","usedUsd":1.5,"usedTokens":150,"usedTimeMs":1500,"usedIterations":1,` +
		`"usdPctOfOptimal":125,"usdPctOfHard":50,"tokensPctOfOptimal":null,"tokensPctOfHard":15,` +
		`"timePctOfOptimal":null,"timePctOfHard":null,"isInWarning":true,"isAtHardCap":false,"usdSource":"reported"}`
	if string(b) != want {
		t.Fatalf("status JSON\n got %s\nwant %s", b, want)
	}
}

func TestBudgetExhaustedErrorMessage(t *testing.T) {
	m := newManager(t, specUSDBudget(), budget.Options{})
	m.RecordUsage(spend(budget.Dollars(3)))
	err := m.Check()
	const want = "budget exhausted: task hard cap on money reached ($3.00 used of $3.00)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// Fields names every numeric field a Config holds, by the path its JSON and
// YAML keys give it, and marks the whole-number ones: readers of budget
// files check numbers against this list, so it must not drift from the
// struct.
func TestFieldsMatchTheConfigStruct(t *testing.T) {
	want := map[string]bool{} // path → whole
	// Every numeric field, at any depth: a tier's thresholds, and
	// top-level ones (stuckAfter). Strings and structs of strings
	// (onHard, warning.forecast, forecastFrom) are not numbers.
	var walk func(prefix string, st reflect.Type)
	walk = func(prefix string, st reflect.Type) {
		for i := range st.NumField() {
			f := st.Field(i)
			path := prefix + strings.Split(f.Tag.Get("json"), ",")[0]
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch kind := ft.Kind(); kind {
			case reflect.Struct:
				walk(path+".", ft)
			case reflect.Int, reflect.Int64:
				want[path] = ft.PkgPath() == ""
			}
		}
	}
	walk("", reflect.TypeOf(budget.Config{}))
	got := map[string]bool{}
	for _, f := range budget.Fields() {
		got[f.Path] = f.Whole
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Fields() = %v\nthe Config struct has %v", got, want)
	}
}
