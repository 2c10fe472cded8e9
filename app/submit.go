package app

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/engine"
)

// Submission is what Submit queues: tasks, read from their files, for the
// workers sharing the database, in the named run.
type Submission struct {
	Run   string   // the run's name, shared by the workers
	Draws string   // --draw-from: named budgets, comma-separated ("": none)
	Files []string // the task files, as given
	Tasks []purser.Task
}

// Submitted is one task Submit handled.
type Submitted struct {
	TaskID string
	File   string // absolute: workers find the task by it
	// Queued is false for a task submitted already, left as it was.
	Queued bool
}

// Submit queues the tasks in the run, which it joins (or creates, with
// App.RunBudget): the run's draws are recorded before any job is queued,
// since a worker may take one at once. done is told of each task handled,
// in order.
func (a *App) Submit(ctx context.Context, sub Submission, done func(Submitted)) error {
	q := a.Queue
	b, err := a.namedBudgets(ctx, false)
	if err != nil {
		return err
	}
	draws, err := Draws(ctx, b.Named, b.DB, sub.Draws, sub.Files, sub.Tasks)
	if err != nil {
		return err
	}
	if _, err := engine.JoinRun(ctx, q, sub.Run, a.RunBudget); err != nil {
		var refused *engine.RequestError
		if errors.As(err, &refused) {
			return BadInput(err)
		}
		return err
	}
	// Before any job is queued: a worker may take one at once.
	if len(draws) > 0 {
		if err := b.Named.DrawFrom(ctx, sub.Run, draws); err != nil {
			return err
		}
	}
	for i, t := range sub.Tasks {
		file, err := filepath.Abs(sub.Files[i])
		if err != nil {
			return err
		}
		if _, err := q.Task(ctx, t.ID); errors.Is(err, purser.ErrNotFound) {
			// Shown by purser status from now on, PENDING until a worker takes it.
			if err := q.SaveTask(ctx, purser.TaskRecord{ID: t.ID, RunID: sub.Run, Goal: t.Goal, Workspace: t.Workspace, File: file,
				Budget: t.Budget, State: purser.StatePending}); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		queued, err := q.SubmitJob(ctx, purser.Job{TaskID: t.ID, RunID: sub.Run, TaskFile: file})
		if err != nil {
			return err
		}
		done(Submitted{TaskID: t.ID, File: file, Queued: queued})
	}
	return nil
}
