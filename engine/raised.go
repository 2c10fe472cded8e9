package engine

import (
	"context"

	"github.com/purser-dev/purser"
)

// keepRaise gives task the budget its record holds when a person raised it
// with purser raise and the task's file still says what it said before:
// the file was not changed, so a run or resume reading it must not undo
// the raise (nor, for a file inside the workspace, be refused for it).
func (e *Engine) keepRaise(ctx context.Context, rec purser.TaskRecord, task *purser.Task) error {
	if sameBudget(&rec.Budget, &task.Budget) {
		return nil
	}
	changes, err := e.cfg.Store.BudgetChanges(ctx, rec.ID)
	if err != nil {
		return err
	}
	if purser.KeepsRaise(changes, rec.Budget, task.Budget) {
		task.Budget = rec.Budget
	}
	return nil
}
