package purser

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/purser-dev/purser/budget"
)

// TaskRaiseSource begins the Source of a BudgetChange made by `purser raise`:
// a person outside the task's box moved its cap. The task's file still
// holds the budget it had before, and a run or resume that reads that file
// keeps the raised budget (KeepsRaise) rather than undo the raise.
const TaskRaiseSource = "purser raise"

// TaskRaiser moves a task's cap from outside its box and, where a worker
// ran it, puts it back on the queue.
type TaskRaiser interface {
	// RaiseTask sets task c.TaskID's recorded budget to c.To, records c
	// among its budget changes and — when its job on the queue finished
	// BLOCKED — queues the job again for a worker to resume, all in one
	// transaction. It reports whether a job was queued again. A missing
	// task matches ErrNotFound; one whose recorded budget is no longer
	// c.From (raised meanwhile), ErrBudgetMoved.
	RaiseTask(ctx context.Context, c BudgetChange) (requeued bool, err error)
}

// ErrBudgetMoved refuses a raise made against a budget that changed since
// it was read: read it again and decide again.
var ErrBudgetMoved = errors.New("the task's budget changed meanwhile")

// KeepsRaise reports whether a task whose recorded budget is recorded, and
// whose file says file, keeps recorded: its last budget change was a raise
// by `purser raise` to recorded, from the budget its file still says.
// Once the file itself changes, the file speaks again.
func KeepsRaise(changes []BudgetChange, recorded, file budget.Config) bool {
	if len(changes) == 0 {
		return false
	}
	last := changes[len(changes)-1]
	return strings.HasPrefix(last.Source, TaskRaiseSource) && sameConfig(last.To, recorded) && sameConfig(last.From, file)
}

// sameConfig compares budgets as they are stored: by their JSON.
func sameConfig(a, b budget.Config) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
