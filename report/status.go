package report

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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

// StatusJSON is `purser status --json`: the database and its tasks.
type StatusJSON struct {
	Database string       `json:"database"`
	Tasks    []TaskStatus `json:"tasks"`
}

// WriteStatusJSON prints the statuses as one indented JSON object.
func WriteStatusJSON(w io.Writer, database string, tasks []TaskStatus) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if tasks == nil {
		tasks = []TaskStatus{} // no tasks is an empty list, never null
	}
	return enc.Encode(StatusJSON{Database: database, Tasks: tasks})
}

// WriteStatusText prints the statuses as a table under the database's
// name; summary says a budget status in one short line.
func WriteStatusText(w io.Writer, database string, tasks []TaskStatus, summary func(budget.Status) string) error {
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
	return tw.Flush()
}
