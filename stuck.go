package purser

import "errors"

// ErrStuck is the cause of a task ended early because it is stuck: the
// same validators failed iteration after iteration (budget.Config's
// StuckAfter) with no change to the workspace. The task is BLOCKED, as at a
// hard cap: more iterations would spend money for nothing, and a person has
// to look.
var ErrStuck = errors.New("stuck")
