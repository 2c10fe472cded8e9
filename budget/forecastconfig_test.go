package budget_test

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser/budget"
)

func TestConfigValidateForecastOnHardStuck(t *testing.T) {
	base := func() budget.Config {
		return budget.Config{Hard: budget.HardLimits{USD: usd("3"), MaxIterations: ptr(5)}}
	}
	tests := []struct {
		name  string
		edit  func(*budget.Config)
		field string // "" for valid
	}{
		{"forecast trigger", func(c *budget.Config) { c.Warning.Forecast = budget.ForecastHard }, ""},
		{"finish-call", func(c *budget.Config) { c.OnHard = budget.OnHardFinishCall }, ""},
		{"cut", func(c *budget.Config) { c.OnHard = budget.OnHardCut }, ""},
		{"stuckAfter", func(c *budget.Config) { c.StuckAfter = ptr(3) }, ""},
		{"corpus", func(c *budget.Config) { c.Forecast = &budget.ForecastSource{Corpus: "runs.jsonl"} }, ""},
		{"unknown trigger", func(c *budget.Config) { c.Warning.Forecast = "soft" }, "warning.forecast"},
		{"trigger without hard.usd", func(c *budget.Config) { c.Hard.USD = nil; c.Warning.Forecast = budget.ForecastHard }, "warning.forecast"},
		{"trigger on hard.tokens alone", func(c *budget.Config) {
			c.Hard.USD, c.Hard.Tokens, c.Warning.Forecast = nil, ptr[int64](100_000), budget.ForecastHard
		}, ""},
		{"trigger on optimal", func(c *budget.Config) { c.Optimal.Forecast = budget.ForecastHard }, "optimal.forecast"},
		{"unknown onHard", func(c *budget.Config) { c.OnHard = "finish" }, "onHard"},
		{"stuckAfter zero", func(c *budget.Config) { c.StuckAfter = ptr(0) }, "stuckAfter"},
		{"corpus empty", func(c *budget.Config) { c.Forecast = &budget.ForecastSource{} }, "forecastFrom.corpus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.edit(&c)
			err := c.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.field+":") {
				t.Fatalf("error %v does not name %s", err, tt.field)
			}
		})
	}
	if (budget.Config{}).FinishCall() || !(budget.Config{OnHard: budget.OnHardFinishCall}).FinishCall() {
		t.Error("FinishCall: the default must cut, finish-call must finish")
	}
}
