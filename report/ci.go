package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/redact"
)

// CITask is one task's row in a CI report.
type CITask struct {
	Record purser.TaskRecord
	Status budget.Status
}

// NoTaskError says a task named for a CI report is not in the database.
type NoTaskError struct{ ID string }

func (e *NoTaskError) Error() string { return fmt.Sprintf("no task %q in the database", e.ID) }

// readCITasks reads the tasks named (every task when none is) and their
// budgets from the store. A task named but not in the store is bad input,
// unless skipMissing (a run's task that never started was not recorded).
func readCITasks(ctx context.Context, store CIStore, ids []string, skipMissing bool) ([]CITask, error) {
	if len(ids) == 0 {
		recs, err := store.Tasks(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
	}
	var out []CITask
	for _, id := range ids {
		rec, err := store.Task(ctx, id)
		if errors.Is(err, purser.ErrNotFound) && skipMissing {
			continue
		}
		if errors.Is(err, purser.ErrNotFound) {
			return nil, &NoTaskError{ID: id}
		}
		if err != nil {
			return nil, err
		}
		st, err := RecordStatus(ctx, store, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, CITask{Record: rec, Status: st})
	}
	return out, nil
}

// GitHubReport writes the tasks' table as GitHub job-summary Markdown to
// summary, and a workflow command per task in WARNING (::warning) or not
// DONE (::error) to stdout, where the runner reads them.
func GitHubReport(stdout, summary io.Writer, tasks []CITask) error {
	return githubReport(stdout, summary, tasks, true)
}

// githubReport is GitHubReport; without workflow (not on a GitHub runner)
// the annotations are plain lines ("error: task … BLOCKED …"), since the
// workflow commands mean nothing outside it.
func githubReport(stdout, summary io.Writer, tasks []CITask, workflow bool) error {
	var b strings.Builder
	b.WriteString("\n### Purser: budget check\n\n")
	b.WriteString("| Task | State | Tier | Money | Tokens | Time | Iterations | Why |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, t := range tasks {
		st := t.Status
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", mdCell(t.Record.ID), stateMark(t.Record.State), strings.ToUpper(st.Tier.String()),
			mdCell(usedOf(t.Record.Budget, st, budget.Money)), usedOf(t.Record.Budget, st, budget.Tokens),
			usedOf(t.Record.Budget, st, budget.Time), usedOf(t.Record.Budget, st, budget.Iterations), mdCell(t.Record.Reason))
	}
	blocked := 0
	for _, t := range tasks {
		if t.Record.State == purser.StateBlocked {
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
	annotate := func(kind, title, msg string) {
		if workflow {
			fmt.Fprintf(stdout, "::%s title=%s::%s\n", kind, ghProperty(title), ghData(msg))
			return
		}
		fmt.Fprintf(stdout, "%s: %s\n", kind, strings.ReplaceAll(msg, "\n", " "))
	}
	for _, t := range tasks {
		st := t.Status
		switch {
		case t.Record.State == purser.StateBlocked:
			annotate("error", "Purser: "+t.Record.ID+" BLOCKED",
				fmt.Sprintf("task %s BLOCKED by its budget (%s): %s. %s", t.Record.ID, st.Cause, redact.Display(t.Record.Reason), usedLine(t.Record.Budget, st)))
		case t.Record.State == purser.StateFailed:
			annotate("error", "Purser: "+t.Record.ID+" FAILED",
				fmt.Sprintf("task %s FAILED: %s", t.Record.ID, redact.Display(t.Record.Reason)))
		case st.Tier == budget.Warning:
			annotate("warning", "Purser: "+t.Record.ID+" in WARNING",
				fmt.Sprintf("task %s ended %s in WARNING by %s: %s", t.Record.ID, t.Record.State, st.Cause, usedLine(t.Record.Budget, st)))
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

// CIStore is what a CI report reads of a store.
type CIStore interface {
	TaskUsage
	Tasks(ctx context.Context) ([]purser.TaskRecord, error)
}

// WriteCIReport reports the tasks named (every task when none is) to the CI
// system: for GitHub, the table appended to $GITHUB_STEP_SUMMARY (printed to
// stdout when it is not set) and the annotations on stdout: workflow
// commands (::error) on a GitHub runner (GITHUB_ACTIONS=true), plain lines
// elsewhere. A task named
// but not in the store is a *NoTaskError, unless skipMissing (a run's task
// that never started was not recorded).
func WriteCIReport(ctx context.Context, stdout io.Writer, store CIStore, ids []string, skipMissing bool) ([]CITask, error) {
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
	return tasks, githubReport(stdout, summary, tasks, os.Getenv("GITHUB_ACTIONS") == "true")
}
