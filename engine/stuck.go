package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/purser-dev/purser"
)

// stuckState counts the iterations in a row that failed the same
// validators without changing the workspace (budget.Config.StuckAfter).
type stuckState struct {
	failing []string // the validators the streak's iterations failed, sorted
	streak  int
}

// checkStuck is told how an iteration ended: the workspace's fingerprint
// before and after its calls, and its validators' results. It returns an
// error wrapping purser.ErrStuck once StuckAfter iterations in a row failed
// the same validators with the workspace unchanged by their calls; nil
// otherwise. An unknown fingerprint ("") never counts: no change cannot be
// told.
func (t *taskRun) checkStuck(before, after string, results []purser.ValidatorResult) error {
	n := t.task.Budget.StuckAfter
	if n == nil {
		return nil
	}
	var failing []string
	for _, r := range results {
		if !r.Passed {
			failing = append(failing, r.Name)
		}
	}
	slices.Sort(failing)
	switch {
	case len(failing) == 0 || before == "" || before != after:
		t.stuck = stuckState{}
		return nil
	case t.stuck.streak > 0 && slices.Equal(failing, t.stuck.failing):
		t.stuck.streak++
	default:
		t.stuck = stuckState{failing: failing, streak: 1}
	}
	if t.stuck.streak < *n {
		return nil
	}
	return fmt.Errorf("%w: %s failed %d iterations in a row with no change to the workspace (stuckAfter: %d)",
		purser.ErrStuck, strings.Join(failing, ", "), t.stuck.streak, *n)
}
