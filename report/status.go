package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/redact"
)

// TaskStatus is one task in `purser status --json`.
type TaskStatus struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Interrupted is true for a RUNNING task whose process is gone (it was
	// killed): `purser resume` continues it.
	Interrupted bool          `json:"interrupted"`
	Reason      string        `json:"reason"`
	RunID       string        `json:"runId"`
	Workspace   string        `json:"workspace"`
	Budget      budget.Status `json:"budget"`
	// Prices says which price tables and rates priced the task's estimates
	// (or why a model had none), per source; empty when every figure was
	// reported.
	Prices []PriceSource `json:"prices"`
	// Forecast is the spend forecast of a task not DONE (purser status
	// sets it); it says when there is too little history for one.
	Forecast *purser.SpendForecast `json:"forecast,omitempty"`
}

// PriceSource is one price table and its rates, and what it priced.
type PriceSource struct {
	Source     string `json:"source"`
	CostSource string `json:"costSource"` // estimated, list or unknown
	Events     int64  `json:"events"`
	Tokens     int64  `json:"tokens"`
	// USD is what it priced, exact; null when the cost was unknown.
	USD *budget.USD `json:"usd"`
}

func priceSources(prices []purser.PriceSourceUsage) []PriceSource {
	out := make([]PriceSource, 0, len(prices))
	for _, p := range prices {
		j := PriceSource{Source: p.Source, CostSource: p.CostSource.String(), Events: p.Events, Tokens: p.Tokens}
		if p.CostSource != budget.CostUnknown {
			usd := p.USD
			j.USD = &usd
		}
		out = append(out, j)
	}
	return out
}

// StatusStore is what a task's status reads of a store.
type StatusStore interface {
	TaskUsage
	PriceSources(ctx context.Context, taskID string) ([]purser.PriceSourceUsage, error)
}

// TaskStatuses are the tasks' statuses, as purser status shows them; gone
// says whether the process that owns a RUNNING task is gone (it was
// interrupted, and purser resume continues it).
func TaskStatuses(ctx context.Context, store StatusStore, recs []purser.TaskRecord, gone func(owner string) bool) ([]TaskStatus, error) {
	out := []TaskStatus{}
	for _, rec := range recs {
		st, err := RecordStatus(ctx, store, rec)
		if err != nil {
			return nil, err
		}
		interrupted := rec.State == purser.StateRunning && gone(rec.Owner)
		reason := rec.Reason
		if interrupted {
			reason = "interrupted: the process running it is gone; purser resume " + rec.ID + " continues it"
		}
		prices, err := store.PriceSources(ctx, rec.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, TaskStatus{ID: rec.ID, Status: string(rec.State), Interrupted: interrupted, Reason: reason,
			RunID: rec.RunID, Workspace: rec.Workspace, Budget: st, Prices: priceSources(prices)})
	}
	return out, nil
}

// RunStatus is one run with a budget in `purser status`: the run's own
// tier, spend and caps. A task's budget says nothing of its run's: a run
// at its hard cap stops tasks whose own tier is OPTIMAL.
type RunStatus struct {
	ID     string        `json:"id"`
	Budget budget.Status `json:"budget"`
	Caps   budget.Config `json:"caps"`
}

// RunStore is what a run's status reads of a store.
type RunStore interface {
	Run(ctx context.Context, id string) (purser.Run, error)
	RunUsageTotals(ctx context.Context, runID string) (budget.Totals, error)
}

// RunStatuses are the statuses of the runs of tasks that have a budget, in
// the order the tasks name them; a run without a budget (or no longer
// recorded) has none.
func RunStatuses(ctx context.Context, store RunStore, tasks []TaskStatus) ([]RunStatus, error) {
	out := []RunStatus{}
	seen := map[string]bool{}
	for _, t := range tasks {
		if t.RunID == "" || seen[t.RunID] {
			continue
		}
		seen[t.RunID] = true
		run, err := store.Run(ctx, t.RunID)
		if errors.Is(err, purser.ErrNotFound) || (err == nil && run.Budget == nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read run %s: %w", t.RunID, err)
		}
		totals, err := store.RunUsageTotals(ctx, run.ID)
		if err != nil {
			return nil, fmt.Errorf("read usage of run %s: %w", run.ID, err)
		}
		st, err := TotalsStatus(*run.Budget, totals, run.Elapsed)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", run.ID, err)
		}
		out = append(out, RunStatus{ID: run.ID, Budget: st, Caps: *run.Budget})
	}
	return out, nil
}

// StatusJSON is `purser status --json`: the database, its tasks, and the
// runs of those tasks that have a budget.
type StatusJSON struct {
	Database string       `json:"database"`
	Tasks    []TaskStatus `json:"tasks"`
	Runs     []RunStatus  `json:"runs"`
}

// WriteStatusJSON prints the statuses as one indented JSON object.
func WriteStatusJSON(w io.Writer, database string, tasks []TaskStatus, runs []RunStatus) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if tasks == nil {
		tasks = []TaskStatus{} // no tasks is an empty list, never null
	}
	if runs == nil {
		runs = []RunStatus{}
	}
	return enc.Encode(StatusJSON{Database: database, Tasks: tasks, Runs: runs})
}

// capsLine says a run budget's hard caps: "hard tokens 2000, iterations 10".
func capsLine(cfg budget.Config) string {
	var parts []string
	for _, m := range budget.Metrics {
		if v, ok := cfg.Threshold(budget.Hard, m); ok {
			parts = append(parts, m.String()+" "+m.Format(v))
		}
	}
	if len(parts) == 0 {
		return "no hard cap"
	}
	return "hard " + strings.Join(parts, ", ")
}

// WriteStatusText prints the statuses as a table under the database's
// name, then a line per run with a budget; summary says a budget status in
// one short line.
func WriteStatusText(w io.Writer, database string, tasks []TaskStatus, runs []RunStatus, summary func(budget.Status) string) error {
	fmt.Fprintf(w, "database: %s\n", database)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATE\tBUDGET\tWHY")
	for _, t := range tasks {
		state := t.Status
		if t.Interrupted {
			state += " (interrupted)"
		}
		// The reason may quote an agent: no escape of its reaches the terminal.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, state, summary(t.Budget), redact.Display(t.Reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range runs {
		if _, err := fmt.Fprintf(w, "run %s: %s (caps: %s)\n", redact.Display(r.ID), summary(r.Budget), capsLine(r.Caps)); err != nil {
			return err
		}
	}
	return nil
}
