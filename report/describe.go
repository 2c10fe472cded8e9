package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// DescribeTask prints what running t, read from path, would do: its
// workspace, backend, models, budget, validators, degrade actions and draws.
func DescribeTask(w io.Writer, path string, t purser.Task) {
	fmt.Fprintf(w, "task %s (%s)\n", t.ID, path)
	fmt.Fprintf(w, "  workspace   %s\n", t.Workspace)
	billing := ""
	if t.Backend.Subscription() {
		billing = ", billing subscription: its dollars are list prices, never money spent"
	}
	fmt.Fprintf(w, "  backend     %s (type %s%s)\n", t.Backend.Name, t.Backend.Type, billing)
	fmt.Fprintf(w, "  models      %s\n", modelsLine(t))
	fmt.Fprintf(w, "  budget      %s\n", strings.Join(budgetLines(t.Budget), "\n              "))
	for i, v := range t.Validators {
		label := "validators"
		if i > 0 {
			label = ""
		}
		timeout := v.Timeout
		if timeout == 0 {
			timeout = purser.DefaultValidatorTimeout
		}
		fmt.Fprintf(w, "  %-10s  %s: %s (timeout %s)\n", label, v.Name, v.Run, shortDuration(timeout))
	}
	actions := make([]string, len(t.Degrade.Steps))
	for i, s := range t.Degrade.Steps {
		actions[i] = string(s.Action)
		if s.At == purser.AtWarningLine {
			actions[i] += " (at warning)"
		}
	}
	if len(actions) == 0 {
		actions = []string{"none"}
	}
	fmt.Fprintf(w, "  degrade     %s\n", strings.Join(actions, ", "))
	if len(t.DrawFrom) > 0 {
		// check opens no database: whether each exists is said at run time.
		fmt.Fprintf(w, "  draws from  %s (named budgets, checked when it runs)\n", strings.Join(t.DrawFrom, ", "))
	}
}

// modelsLine says the model of each tier and the one the task starts on.
func modelsLine(t purser.Task) string {
	if len(t.Backend.Models) == 0 {
		return "none configured: the backend's own default model; starts on " + t.ModelTier
	}
	tiers := make([]string, 0, len(t.Backend.Models))
	for _, tier := range slices.Sorted(maps.Keys(t.Backend.Models)) {
		tiers = append(tiers, tier+" "+t.Backend.Models[tier])
	}
	model, _ := t.Backend.Model(t.ModelTier)
	return fmt.Sprintf("%s; starts on %s (%s)", strings.Join(tiers, ", "), t.ModelTier, model)
}

// budgetLines says, per metric, each configured tier's threshold, or that the
// metric is not enforced.
func budgetLines(cfg budget.Config) []string {
	var lines []string
	for _, m := range budget.Metrics {
		var parts []string
		for _, tier := range []budget.Tier{budget.Optimal, budget.Warning, budget.Hard} {
			if v, ok := cfg.Threshold(tier, m); ok {
				parts = append(parts, tier.String()+" "+m.Format(v))
			}
		}
		if len(parts) == 0 {
			parts = []string{"not enforced"}
		}
		lines = append(lines, fmt.Sprintf("%-12s %s", m.String()+":", strings.Join(parts, ", ")))
	}
	return lines
}

// shortDuration drops a duration's zero tail: 10m, not 10m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
