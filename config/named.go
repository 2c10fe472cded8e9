package config

import (
	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// LoadNamedBudget reads and validates a named budget's file (YAML or
// JSON): a budget file as for a task, but over money and tokens only and
// without the cap on iterations; each problem names its line and field.
func LoadNamedBudget(path string) (budget.Config, error) {
	data, err := readFile(path)
	if err != nil {
		return budget.Config{}, err
	}
	var cfg budget.Config
	d, err := decodeBudgeted(path, data, "", &cfg)
	if err != nil {
		return budget.Config{}, err
	}
	if err := purser.ValidateNamedBudgetConfig(cfg); err != nil {
		return budget.Config{}, d.locate(err, "")
	}
	return cfg, nil
}
