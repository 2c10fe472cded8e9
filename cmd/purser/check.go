package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/pricing"
)

func newCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check TASKFILE...",
		Short: "Check task files as run would, and say what would run, spending nothing",
		Long: `Loads each task file and its purser.yaml exactly as run does before it starts,
with every check made before a cent is spent: the task's fields and budget,
its workspace, and its backend's options (decoded strictly; the sim script
loaded, the agent CLI or exec program found, the API-key variable set). The
database is not opened. For each task it prints what would run: the backend,
the model of each tier and the one it starts on, the budget, the validators
and the workspace.

Exit codes: 0 every task would run; 2 a problem was found (each on stderr,
with its file, line and field).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			ids := map[string]string{}
			for _, path := range args {
				t, proj, err := loadTask(path)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if other, ok := ids[t.ID]; ok {
					errs = append(errs, fmt.Errorf("%s: task id %q is also the id of %s", path, t.ID, other))
					continue
				}
				ids[t.ID] = path
				describeTask(cmd.OutOrStdout(), path, t)
				if b, err := backends()(t.Backend); err == nil {
					if m, ok := b.(purser.Metered); ok {
						fmt.Fprintf(cmd.OutOrStdout(), "  metering    %s\n", m.Metering())
					}
				}
				if err := checkUnpriced(cmd.ErrOrStderr(), []purser.Task{t}, nil, proj.Prices); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", path, err))
				}
			}
			if len(errs) > 0 {
				return badInput(errors.Join(errs...))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: %d %s would run\n", len(args), plural(len(args), "task", "tasks"))
			return nil
		},
	}
}

// describeTask prints what running t would do.
func describeTask(w io.Writer, path string, t purser.Task) {
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

// callModels are the models a task may call: its starting tier's, and the
// cheap tier's when switch_tier_cheap may move it there.
func callModels(t purser.Task) []string {
	start, _ := t.Backend.Model(t.ModelTier)
	models := []string{start}
	if cheap, ok := t.Backend.Model(purser.CheapTier); ok && cheap != start {
		for _, s := range t.Degrade.Steps {
			if s.Action == purser.SwitchTierCheap {
				models = append(models, cheap)
				break
			}
		}
	}
	return models
}

// checkUnpriced warns on w, before anything is spent, of each model the
// tasks may call that has no price, and returns the refusals: the calls the
// engine would refuse because only a money cap would bound them (run is the
// run's budget, or nil). The engine makes the same check before every call;
// this one says so before a database is opened.
func checkUnpriced(w io.Writer, tasks []purser.Task, run *budget.Config, prices *pricing.Catalogue) error {
	var errs []error
	for _, t := range tasks {
		var fence purser.SpendFence
		if b, err := backends()(t.Backend); err == nil {
			fence, _ = b.(purser.SpendFence)
		}
		for _, model := range callModels(t) {
			u := engine.CheckUnpriced(prices, t, run, model, fence != nil && fence.FencesUSD(model))
			switch {
			case u == nil:
			case u.Refused != nil:
				errs = append(errs, u.Refused)
			default:
				fmt.Fprintln(w, "purser:", u.Warning())
			}
		}
	}
	return errors.Join(errs...)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
