package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/redact"
	"github.com/purser-dev/purser/report"
)

// ciSystems are the CI systems --ci knows.
var ciSystems = []string{"github"}

// checkCI refuses a --ci value Purser does not know.
func checkCI(ci string) error {
	if ci == "" || ci == "github" {
		return nil
	}
	return badInput(fmt.Errorf("--ci: %q is not a CI system Purser knows (known: %s)", ci, strings.Join(ciSystems, ", ")))
}

// ciTask is one task's row in a CI report.
type ciTask struct {
	rec    purser.TaskRecord
	status budget.Status
}

// readCITasks reads the tasks named (every task when none is) and their
// budgets from the store. A task named but not in the store is bad input,
// unless skipMissing (a run's task that never started was not recorded).
func readCITasks(ctx context.Context, store purser.Store, ids []string, skipMissing bool) ([]ciTask, error) {
	if len(ids) == 0 {
		recs, err := store.Tasks(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
	}
	var out []ciTask
	for _, id := range ids {
		rec, err := store.Task(ctx, id)
		if errors.Is(err, purser.ErrNotFound) && skipMissing {
			continue
		}
		if errors.Is(err, purser.ErrNotFound) {
			return nil, badInput(fmt.Errorf("no task %q in the database", id))
		}
		if err != nil {
			return nil, err
		}
		st, _, err := report.RecordedStatus(ctx, store, id)
		if err != nil {
			return nil, err
		}
		out = append(out, ciTask{rec: rec, status: st})
	}
	return out, nil
}

// githubReport writes the tasks' table as GitHub job-summary Markdown to
// summary, and a workflow command per task in WARNING (::warning) or not
// DONE (::error) to stdout, where the runner reads them.
func githubReport(stdout, summary io.Writer, tasks []ciTask) error {
	var b strings.Builder
	b.WriteString("\n### Purser: budget check\n\n")
	b.WriteString("| Task | State | Tier | Money | Tokens | Time | Iterations | Why |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, t := range tasks {
		st := t.status
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", mdCell(t.rec.ID), stateMark(t.rec.State), strings.ToUpper(st.Tier.String()),
			mdCell(usedOf(t.rec.Budget, st, budget.Money)), usedOf(t.rec.Budget, st, budget.Tokens),
			usedOf(t.rec.Budget, st, budget.Time), usedOf(t.rec.Budget, st, budget.Iterations), mdCell(t.rec.Reason))
	}
	blocked := 0
	for _, t := range tasks {
		if t.rec.State == purser.StateBlocked {
			blocked++
		}
	}
	if blocked > 0 {
		fmt.Fprintf(&b, "\n**%d task(s) BLOCKED by their budget.** The workspace is left as the agent left it; STATUS.md at its root says why and what to do; `purser explain TASK` says it in words, `purser resume TASK --budget FILE` continues with a raised budget.\n", blocked)
	}
	b.WriteString("\n")
	if _, err := io.WriteString(summary, b.String()); err != nil {
		return fmt.Errorf("job summary: %w", err)
	}
	for _, t := range tasks {
		st := t.status
		switch {
		case t.rec.State == purser.StateBlocked:
			fmt.Fprintf(stdout, "::error title=%s::%s\n", ghProperty("Purser: "+t.rec.ID+" BLOCKED"),
				ghData(fmt.Sprintf("task %s BLOCKED by its budget (%s): %s. %s", t.rec.ID, st.Cause, redact.Display(t.rec.Reason), usedLine(t.rec.Budget, st))))
		case t.rec.State == purser.StateFailed:
			fmt.Fprintf(stdout, "::error title=%s::%s\n", ghProperty("Purser: "+t.rec.ID+" FAILED"),
				ghData(fmt.Sprintf("task %s FAILED: %s", t.rec.ID, redact.Display(t.rec.Reason))))
		case st.Tier == budget.Warning:
			fmt.Fprintf(stdout, "::warning title=%s::%s\n", ghProperty("Purser: "+t.rec.ID+" in WARNING"),
				ghData(fmt.Sprintf("task %s ended %s in WARNING by %s: %s", t.rec.ID, t.rec.State, st.Cause, usedLine(t.rec.Budget, st))))
		}
	}
	return nil
}

// usedOf is a metric's use against its hard cap ("$0.70 / $1.00"), or its
// use alone where no cap is configured.
func usedOf(cfg budget.Config, st budget.Status, m budget.Metric) string {
	used := m.Format(st.Used(m))
	if m == budget.Money {
		used = budget.FormatUSD(st.UsedUSD, st.USDSource)
	}
	if hard, ok := cfg.Threshold(budget.Hard, m); ok {
		return used + " / " + m.Format(hard)
	}
	return used
}

// usedLine is every configured metric's use against its cap, in one line.
func usedLine(cfg budget.Config, st budget.Status) string {
	var parts []string
	for _, m := range budget.Metrics {
		if _, ok := cfg.Threshold(budget.Hard, m); ok {
			parts = append(parts, m.String()+" "+usedOf(cfg, st, m))
		}
	}
	return "Used " + strings.Join(parts, ", ")
}

func stateMark(s purser.TaskState) string {
	switch s {
	case purser.StateDone:
		return "✅ DONE"
	case purser.StateBlocked:
		return "⛔ BLOCKED"
	case purser.StateFailed:
		return "❌ FAILED"
	}
	return string(s)
}

// mdCell makes text safe in a Markdown table cell: secrets and control
// characters removed, pipes escaped, one line.
func mdCell(s string) string {
	s = redact.Display(s)
	s = strings.NewReplacer("|", `\|`, "\r", " ", "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
	return strings.TrimSpace(s)
}

// ghData escapes a workflow command's message, as the runner unescapes it.
func ghData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// ghProperty escapes a workflow command's property value.
func ghProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// writeCIReport reports the tasks to the CI system: for GitHub, the table
// appended to $GITHUB_STEP_SUMMARY (printed to stdout when it is not set)
// and the annotations on stdout.
func writeCIReport(ctx context.Context, stdout io.Writer, store purser.Store, ids []string, skipMissing bool) ([]ciTask, error) {
	tasks, err := readCITasks(ctx, store, ids, skipMissing)
	if err != nil {
		return nil, err
	}
	summary := stdout
	if path := os.Getenv("GITHUB_STEP_SUMMARY"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, fmt.Errorf("$GITHUB_STEP_SUMMARY: %w", err)
		}
		defer f.Close()
		summary = f
	}
	return tasks, githubReport(stdout, summary, tasks)
}

func newCISummaryCmd() *cobra.Command {
	var db, ci string
	cmd := &cobra.Command{
		Use:   "ci-summary [TASK...] [--ci github] [--db PATH]",
		Short: "Report tasks to a CI system: job summary, annotations, and a failing check when a task is BLOCKED",
		Long: `Reports the tasks named (every task of the database when none is) to a CI
system. For GitHub Actions (--ci github, the default): the table of tasks is
appended to $GITHUB_STEP_SUMMARY as Markdown (printed when that is not set),
and a ::warning annotation is printed for each task that ended in WARNING, an
::error for each BLOCKED or FAILED one.

Exit codes: 0 no task is BLOCKED or FAILED; 3 a task is BLOCKED by its
budget; 1 a task FAILED; 2 bad input.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCI(ci); err != nil {
				return err
			}
			a, err := openHere(cmd, db)
			if err != nil {
				return err
			}
			defer a.Close()
			store := a.Store
			tasks, err := writeCIReport(cmd.Context(), cmd.OutOrStdout(), store, args, false)
			if err != nil {
				return err
			}
			code := exitOK
			for _, t := range tasks {
				switch t.rec.State {
				case purser.StateFailed:
					code = exitFailure
				case purser.StateBlocked:
					if code == exitOK {
						code = exitBudgetStop
					}
				}
			}
			if code != exitOK {
				return &exitError{code: code, err: errors.New("a task did not end DONE"), reported: true}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", app.DBFlagHelp)
	cmd.Flags().StringVar(&ci, "ci", "github", "the CI system: github")
	return cmd
}
