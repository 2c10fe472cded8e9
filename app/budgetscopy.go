package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/workspace"
)

// copyingStore is the project's store as the engine writes to it when the
// named budgets live in a database apart: each ledger append of a run
// drawing from a named budget is copied to the budgets database too (its
// named_usage), under the same keys, so that the budget's spend is
// readable where the budget is. The project's ledger is written first: it
// is the truth of what was spent. A copy that fails, or a process that
// died between the two, is healed by the keys: the first append of a task
// in a process (and the next after a failed copy) copies the task's whole
// ledger, each entry once. Batches of any tasks and runs are taken.
type copyingStore struct {
	Store
	project Database // the project's database, for errors
	budgets *Budgets
	copies  purser.NamedUsage

	mu     sync.Mutex
	copied map[string]bool // tasks whose whole ledger this process copied
}

// newCopyingStore wraps the project's store s to copy to b, a budgets
// database apart from it.
func newCopyingStore(s Store, project Database, b *Budgets) (*copyingStore, error) {
	copies, ok := b.store.(purser.NamedUsage)
	if !ok {
		return nil, fmt.Errorf("budgets database %s: %w", b.DB, errNoCopies)
	}
	return &copyingStore{Store: s, project: project, budgets: b, copies: copies, copied: map[string]bool{}}, nil
}

// AppendUsage appends the entries to the project's ledger, then copies
// those of runs drawing from a named budget to the budgets database.
func (c *copyingStore) AppendUsage(ctx context.Context, entries ...purser.LedgerEntry) error {
	if err := c.Store.AppendUsage(ctx, entries...); err != nil {
		return err
	}
	if err := c.copy(ctx, entries); err != nil {
		return fmt.Errorf("usage recorded in the project's database %s, but not copied to the budgets database %s (copied at the task's next append): %w", c.project, c.budgets.DB, err)
	}
	return nil
}

// copy copies entries of drawing runs, and the whole ledger of each of
// their tasks not copied whole yet in this process.
func (c *copyingStore) copy(ctx context.Context, entries []purser.LedgerEntry) error {
	var out []purser.LedgerEntry
	var whole []string // tasks copied whole by this call
	for _, e := range entries {
		ok, err := c.budgets.project.drawing(ctx, e.RunID)
		if err != nil || !ok {
			if err != nil {
				return err
			}
			continue
		}
		if !c.take(e.TaskID) {
			out = append(out, e)
			continue
		}
		whole = append(whole, e.TaskID)
		ledger, err := c.Store.Usage(ctx, e.TaskID)
		if err != nil {
			c.forget(whole)
			return fmt.Errorf("read task %s's ledger to copy: %w", e.TaskID, err)
		}
		for _, l := range ledger {
			if drawn, err := c.budgets.project.drawing(ctx, l.RunID); err == nil && drawn {
				out = append(out, l)
			}
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil
	}
	for i := range out {
		out[i].RunID = c.budgets.Run(out[i].RunID)
	}
	if err := c.copies.AppendNamedUsage(ctx, out...); err != nil {
		var tasks []string
		for _, e := range out {
			if !slices.Contains(tasks, e.TaskID) {
				tasks = append(tasks, e.TaskID)
			}
		}
		c.forget(tasks)
		return err
	}
	return nil
}

// take marks a task as copied whole, reporting whether it was not yet.
func (c *copyingStore) take(taskID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.copied[taskID] {
		return false
	}
	c.copied[taskID] = true
	return true
}

// forget makes the tasks' next append copy their whole ledger again.
func (c *copyingStore) forget(tasks []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range tasks {
		delete(c.copied, t)
	}
}

// OwnFiles are the files of both databases: no agent may write either.
func (c *copyingStore) OwnFiles() []string {
	var files []string
	for _, s := range []any{c.Store, c.budgets.store} {
		if o, ok := s.(workspace.FileOwner); ok {
			files = append(files, o.OwnFiles()...)
		}
	}
	return files
}

// WatchRunUsage is the project's store's: a run's ledger is there.
func (c *copyingStore) WatchRunUsage(ctx context.Context, runID string) (<-chan struct{}, error) {
	w, ok := c.Store.(purser.RunUsageWatcher)
	if !ok {
		return nil, errors.New("the project's store does not tell of new usage")
	}
	return w.WatchRunUsage(ctx, runID)
}

// bothHolds is the project's shared run budget, as the engine drops the
// holds a dead process left: on runs (the project's database) and on
// named budgets (the budgets database, apart).
type bothHolds struct {
	purser.SharedRunBudget
	project, budgets any
}

// DropHolds drops owner's holds in both databases.
func (b bothHolds) DropHolds(ctx context.Context, owner, taskID string) ([]purser.DroppedHolds, error) {
	out := []purser.DroppedHolds{}
	var errs []error
	for _, s := range []any{b.project, b.budgets} {
		if d, ok := s.(purser.HoldDropper); ok {
			dropped, err := d.DropHolds(ctx, owner, taskID)
			out = append(out, dropped...)
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// Holders are the holders of unexpired holds in both databases.
func (b bothHolds) Holders(ctx context.Context) ([]purser.Holder, error) {
	var out []purser.Holder
	var errs []error
	for _, s := range []any{b.project, b.budgets} {
		if r, ok := s.(purser.HoldReaper); ok {
			hs, err := r.Holders(ctx)
			errs = append(errs, err)
			for _, h := range hs {
				if !slices.Contains(out, h) {
					out = append(out, h)
				}
			}
		}
	}
	return out, errors.Join(errs...)
}

// DropLapsedHolds drops the holds of the project's jobs whose leases ran
// out, in the project's database (where its queue is).
func (b bothHolds) DropLapsedHolds(ctx context.Context) ([]purser.DroppedHolds, error) {
	if r, ok := b.project.(purser.HoldReaper); ok {
		return r.DropLapsedHolds(ctx)
	}
	return []purser.DroppedHolds{}, nil
}

// compile-time checks of what the engine looks for.
var (
	_ purser.HoldDropper     = bothHolds{}
	_ purser.HoldReaper      = bothHolds{}
	_ purser.RunUsageWatcher = (*copyingStore)(nil)
	_ workspace.FileOwner    = (*copyingStore)(nil)
)
