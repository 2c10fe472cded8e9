package purser

import (
	"context"

	"github.com/purser-dev/purser/budget"
)

// TaskStop is what the engine knows of a task as it stops, besides the
// task's history in the store: what STATUS.md and BUDGET.md are rendered
// from.
type TaskStop struct {
	Task  Task
	State TaskState
	Cause error // why it stopped; nil when DONE
	// Status is the task's budget as it stops; RunStatus and RunBudget its
	// run's, when it ran under a run budget (RunStatus nil otherwise).
	Status    budget.Status
	RunStatus *budget.Status
	RunBudget budget.Config
	// InGitRepo says the workspace lies in a git repository, so the manual
	// steps can point at git status and git diff.
	InGitRepo bool
	// DoneNote says how a DONE task got there when it is not the plain
	// case (its validators passed once more after a hard cap stopped the
	// call that fixed it).
	DoneNote string
	// Forecast is the task's last spend forecast; nil when it had no
	// forecaster (STATUS.md then says nothing of one).
	Forecast *SpendForecast
}

// ArtifactRenderer renders the two files the engine writes at a task's
// workspace root, and keeps in the store, when the task stops. The engine
// only writes them; what they say is the renderer's (package report).
type ArtifactRenderer interface {
	// RenderArtifacts returns STATUS.md and BUDGET.md for the stopped task,
	// reading its history from s.
	RenderArtifacts(ctx context.Context, s StoreReader, stop TaskStop) (statusMD, budgetMD []byte, err error)
}
