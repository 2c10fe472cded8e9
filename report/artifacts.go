package report

import (
	"context"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/workspace"
)

// Artifacts renders STATUS.md and BUDGET.md for the engine: the
// purser.ArtifactRenderer the wiring gives engine.Config.
type Artifacts struct {
	// Sandbox says, for a task, the files' line on its box (Report.Sandbox);
	// nil: sandbox: off.
	Sandbox func(purser.Task) string
}

var _ purser.ArtifactRenderer = Artifacts{}

// RenderArtifacts loads the task's history from s and renders StatusMD and
// BudgetMD from it and what the engine knows of the stop.
func (a Artifacts) RenderArtifacts(ctx context.Context, s purser.StoreReader, stop purser.TaskStop) (statusMD, budgetMD []byte, err error) {
	r, err := Load(ctx, s, stop.Task.ID)
	if err != nil {
		return nil, nil, err
	}
	r.Task = stop.Task
	r.State = stop.State
	r.Cause = stop.Cause
	r.Status = stop.Status
	r.RunStatus = stop.RunStatus
	r.RunBudget = stop.RunBudget
	r.InGitRepo = stop.InGitRepo
	r.DoneNote = stop.DoneNote
	r.Forecast = stop.Forecast
	r.BudgetFile = workspace.ArtifactsOf(stop.Task.Workspace, stop.Task.ID).Budget
	if a.Sandbox != nil {
		r.Sandbox = a.Sandbox(stop.Task)
	}
	return StatusMD(r), BudgetMD(r), nil
}
